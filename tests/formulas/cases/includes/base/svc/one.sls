svc_one:
  service.running
