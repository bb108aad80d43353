#!py
"""
The web user, from Python as Salt's py renderer runs it.
"""


def run():
    user = __pillar__.get("nginx", {}).get("user", "www")
    shell = __salt__["config.get"]("nginx:shell", "/usr/sbin/nologin")
    return {
        "nginx-user-" + user: {
            "user.present": [
                {"name": user},
                {"shell": shell},
                {"home": "/var/www"},
                {"comment": "web user on " + __grains__["os"] + " (" + __sls__ + ", " + __env__ + ")"},
            ],
        },
        "nginx-group-" + user: {"group": ["present", {"name": user}, {"require_in": [{"user": "nginx-user-" + user}]}]},
    }
