nginx:
  lookup:
    service:
      enable: false
  worker_processes: 4
  user: web
  vhosts:
    example:
      server_name: example.com
    api:
      server_name: api.example.com
      port: 8080
