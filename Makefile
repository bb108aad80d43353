# salttwist: `make demo` shows it working, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint demo bench bench-cluster bench-jobcache-pg bench-salt clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# An editable install puts this checkout on sys.path (setup.cfg: package_dir),
	# so the plugins in twisted/plugins are found and edits take effect without
	# reinstalling. The integration tests run a wheel installed elsewhere.
	# unicode-ids builds PyICU (allow_unicode_minion_ids), which needs ICU's headers
	# (Debian: libicu-dev pkg-config; .ci/run installs them). Without it, the
	# tests of that option are skipped, saying so.
	$(BIN)/pip install -q -e '.[test,unicode-ids]' || { \
	  echo "PyICU could not be built (Debian: apt-get install libicu-dev pkg-config):" \
	       "the allow_unicode_minion_ids tests will be skipped"; \
	  $(BIN)/pip install -q -e '.[test]'; }
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python tools/runtests.py tests

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

demo: $(STAMP)
	$(BIN)/python tools/demo.py

# Real master, swarms of 100 and 1000 simulated minions, one real minion;
# more with e.g. make bench BENCH_ARGS='--sizes 100,1000,5000'.
bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

# Three clustered masters (NATS JetStream, PostgreSQL keys and job cache)
# and 10,000 failover swarm minions (as many as benchmarks/.keys holds):
# fan-out, returns/s into PostgreSQL, failover after kill -9, CPU per
# return; e.g. make bench-cluster CLUSTER_BENCH_ARGS='-n 5000'.
bench-cluster: $(STAMP)
	$(BIN)/python benchmarks/cluster_bench.py $(CLUSTER_BENCH_ARGS)

# The PostgreSQL job cache at 10 million returns, in a database of its own
# on 127.0.0.1:5432 (filled server-side, dropped after): the master's and
# the runners' reads, writes and prunes, medians and p95 in ms; e.g.
# make bench-jobcache-pg JOBCACHE_PG_BENCH_ARGS='--jobs 9900 --json out.json'.
bench-jobcache-pg: $(STAMP)
	$(BIN)/python benchmarks/jobcache_pg_10m_bench.py $(JOBCACHE_PG_BENCH_ARGS)

# Beside Salt 3008.5, which run.py installs into .salt-venv the first time;
# e.g. make bench-salt VS_SALT_ARGS='--minions 1,20,50'.
bench-salt: $(STAMP)
	$(BIN)/python benchmarks/vs_salt/run.py $(VS_SALT_ARGS)

clean:
	rm -rf $(VENV) _trial_temp* .demo
