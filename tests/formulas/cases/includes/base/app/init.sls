include:
  - .config
  - app.sub.deep
  - base: common
  - 'svc.*'

app_pkg:
  pkg.installed
