# Regenerates expected.json with real Salt: see expected.json "source".
# Usage: <salt venv>/bin/python salt_expected.py <config dir> nginx
"""Real Salt: render_highstate + call_high's steps, and compile_high_data."""

import json
import sys

import salt.config
import salt.state

opts = salt.config.minion_config(sys.argv[1] + "/minion")
opts["file_client"] = "local"
mods = sys.argv[2].split(",")
with salt.state.HighState(opts) as st_:
    high, errors = st_.render_highstate({"base": mods})
    show_sls = json.loads(json.dumps(high))
    high, ext = st_.state.reconcile_extend(high)
    errors += ext
    errors += st_.state.verify_high(high)
    high, req = st_.state.requisite_in(high)
    errors += req
    high = st_.state.apply_exclude(high)
    resolved = json.loads(json.dumps(high))
    chunks, cerr = st_.state.compile_high_data(high)
    errors += cerr
print(
    json.dumps({"show_sls": show_sls, "high": resolved, "low": chunks, "errors": errors}, indent=1)
)
