common_pkg:
  pkg.installed:
    - name: common
