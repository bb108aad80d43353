# -*- test-case-name: tests.test_api_resource -*-
"""
C{salttwist-api}: Salt's REST API (rest_cherrypy's URLs and JSON shapes)
on twisted.web, for the master on this host, which it reaches over the
wire as the command line does (L{salttwist.client}).

The layout, one module per job:

  - L{salttwist.api.options}: the C{rest_cherrypy:} block, checked;
  - L{salttwist.api.context}: L{ApiContext <salttwist.api.context.ApiContext>},
    what every resource shares (config, clock, authenticator, master);
  - L{salttwist.api.resource}: L{ApiResource
    <salttwist.api.resource.ApiResource>}, the base of every endpoint
    (token check by C{X-Auth-Token}, bodies, answers, errors, headers);
  - L{salttwist.api.errors}: the errors and their JSON shape;
  - L{salttwist.api.app}: the tree; L{mountResources
    <salttwist.api.app.mountResources>} is where an endpoint family is added;
  - one module per family: C{lowstate} (C{/}), C{login}, C{minions},
    C{jobs}, C{keys}, C{stats_resource};
  - L{salttwist.api.gateway}: the master, over the wire; L{salttwist.api.wheel}:
    Salt's wheel key functions;
  - L{salttwist.api.service}, C{tap}, C{cli}: the daemon.

Adding a resource: subclass L{ApiResource
<salttwist.api.resource.ApiResource>} in a module of its own (C{async def
GET(self, call)} returning the data), then add one C{root.putChild(...)}
line to L{salttwist.api.app.mountResources}. Unit tests drive the tree in
memory: see C{tests/test_api_resource.py} (L{treq.testing.StubTreq}).
"""
