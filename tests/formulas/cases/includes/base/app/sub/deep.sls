include:
  - ..config
  - ...common

deep_thing:
  cmd.run:
    - name: echo {{ sls }} {{ slspath }} {{ tpldir }}
