# -*- coding: utf-8 -*-
# vim: ft=sls

include:
  - .package
  - .config
  - .service
  - .sites

exclude:
  - id: nginx-unwanted-default-site
