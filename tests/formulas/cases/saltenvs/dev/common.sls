dev_common:
  cmd.run:
    - name: echo {{ saltenv }} {{ sls }}
