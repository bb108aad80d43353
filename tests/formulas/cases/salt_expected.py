"""
Regenerates expected.json from real Salt (3008.5): for each case of
cases.json, Salt's own HighState renders the case's C{base} tree and runs
C{call_high}'s steps (reconcile_extend, verify_high, requisite_in,
apply_exclude) and C{compile_high_data}, stopping where Salt stops at the
first errors.

Usage: <salt venv>/bin/python salt_expected.py
"""

import copy
import json
import os
import tempfile

import salt.config
import salt.state

HERE = os.path.dirname(os.path.abspath(__file__))


def plain(data):
    return json.loads(json.dumps(data, default=str))


def run(case, spec):
    tmp = tempfile.mkdtemp()
    conf = os.path.join(tmp, "minion")
    with open(conf, "w") as f:
        json.dump(
            {
                "file_client": "local",
                "id": "parity",
                "file_roots": {
                    env: [os.path.join(HERE, case, env)]
                    for env in sorted(os.listdir(os.path.join(HERE, case)))
                },
                "pillar_roots": {"base": [os.path.join(tmp, "pillar")]},
                "cachedir": os.path.join(tmp, "cache"),
                "pki_dir": os.path.join(tmp, "pki"),
                "sock_dir": os.path.join(tmp, "sock"),
                "log_file": os.path.join(tmp, "log"),
                "grains": {"os": "Debian", "os_family": "Debian"},
            },
            f,
        )
    opts = salt.config.minion_config(conf)
    opts.update(spec.get("opts", {}))
    out = {}
    with salt.state.HighState(opts) as st_:
        high, errors = st_.render_highstate(spec.get("matches") or {"base": spec["mods"]})
        out["show_sls"] = plain(copy.deepcopy(high))
        out["render_errors"] = list(errors)
        high, ext = st_.state.reconcile_extend(high)
        errors = list(ext) + st_.state.verify_high(high)
        out["verify_errors"] = errors
        if errors:
            return out
        high, req = st_.state.requisite_in(high)
        high = st_.state.apply_exclude(high)
        out["high"] = plain(high)
        out["requisite_in_errors"] = list(req)
        chunks, cerr = st_.state.compile_high_data(high)
        out["low"] = plain(chunks)
        out["low_errors"] = list(cerr)
    return out


def main():
    with open(os.path.join(HERE, "cases.json")) as f:
        cases = json.load(f)
    expected = {
        "source": "Real Salt 3008.5 through salt_expected.py (Salt's HighState in-process).",
        "cases": {case: run(case, spec) for case, spec in cases.items()},
    }
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=False)
        f.write("\n")


if __name__ == "__main__":
    main()
