gone_thing:
  cmd.run

extend:
  lib_svc:
    service:
      - reload: True
