base:
  '*':
    - nginx
