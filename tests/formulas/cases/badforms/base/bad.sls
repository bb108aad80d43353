two_funs:
  cmd:
    - run
    - wait
no_fun:
  cmd:
    - name: x
trailing:
  pkg.installed:
not_a_list:
  cmd: run
not_a_dict: 5
spaced:
  cmd:
    - run now
req_not_list:
  cmd.run:
    - require: {cmd: x}
dotted_req:
  cmd.run:
    - require:
      - cmd.run: spaced
names_not_list:
  cmd.run:
    - names: single
