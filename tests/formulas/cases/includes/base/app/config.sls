include:
  - app

app_conf:
  file.managed:
    - name: /etc/app.conf
