git: pkg.installed

motd:
  file:
    - managed
    - name: /etc/motd
    - contents: hi

/etc/issue:
  file.managed:
    - contents: issue
  cmd.run:
    - name: cat /etc/issue
    - require:
      - file: /etc/issue

early:
  cmd.run:
    - order: first

late:
  cmd.run:
    - order: last

before_late:
  cmd.run:
    - order: -1

numbered:
  cmd.run:
    - order: 5

badname:
  cmd.run:
    - name: 42
    - state: file

tools:
  pkg.installed:
    - names:
      - vim
      - curl:
        - version: 7.0
      - vim
