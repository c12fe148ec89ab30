# ringslot: the two set-up commands are `make run` and `make test`.
CARGO ?= cargo
MODULE_RELEASE := target/release/libringslot.so
MODULE_DEBUG := target/debug/libringslot.so
# The other servers the tests run on (scripts/servers.sh fetches them).
VALKEY_SERVER := $(CURDIR)/.deps/valkey-9.1.2/valkey-server
REDIS8_SERVER := $(CURDIR)/.deps/redis-8.2.3/redis-server

.PHONY: all deps servers build release run dist test test-all test-repeat soak lint bench bench-migration bench-balance bench-instructions bench-throughput bench-throughput-ab bench-limits bench-whatif bench-cluster bench-cluster-atomic bench-cluster-duration bench-cluster-fit bench-cache bench-spread bench-apply bench-parallel bench-netem bench-predict-scale bench-big-keys bench-status bench-compat bench-relief clean

all: release

## deps: install redis-server, redis-tools, libclang-dev, nutcracker and memcached from Debian when missing
deps:
	@./scripts/deps.sh

## build: debug build of the module (what the integration tests load)
build: deps
	$(CARGO) build --lib

## release: optimised module at target/release/libringslot.so
release: deps
	$(CARGO) build --release --lib

PORT ?= 6379

## dist: the operator's tool as one release binary, target/dist/ringslot, to copy onto a host
## without a Rust toolchain (it links libc dynamically: the glibc it needs is printed; no
## libssl), with its man pages (target/dist/man/man1) and shell completions
## (target/dist/completions). `cargo install --locked --path tool` installs the binary into
## ~/.cargo/bin instead.
dist:
	$(CARGO) build --release -p ringslot-tool --bin ringslot
	@mkdir -p target/dist/man/man1 target/dist/completions
	@cp target/release/ringslot target/dist/ringslot
	@strip target/dist/ringslot 2>/dev/null || true
	@target/dist/ringslot man --dir target/dist/man/man1
	@target/dist/ringslot completions bash > target/dist/completions/ringslot.bash
	@target/dist/ringslot completions zsh > target/dist/completions/_ringslot
	@target/dist/ringslot completions fish > target/dist/completions/ringslot.fish
	@echo "target/dist/man/man1: $$(ls target/dist/man/man1 | tr '\n' ' ')(man -M target/dist/man ringslot)"
	@echo "target/dist/completions: ringslot.bash, _ringslot (zsh), ringslot.fish"
	@echo "target/dist/ringslot: $$(target/dist/ringslot --version); needs glibc" \
	  "$$(objdump -T target/dist/ringslot | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -1 | cut -d_ -f2)" \
	  "or later"

## run: build the module and start redis-server with redis.conf (port 6379, Ctrl-C stops it;
## its data, RDB and AOF, stays in data/ for the next run)
run:
	@if redis-cli -p $(PORT) ping >/dev/null 2>&1; then \
	  echo "run: a server already answers on port $(PORT) (Debian's redis-server service?)."; \
	  echo "     Stop it (service redis-server stop) or pick another port: make run PORT=$$(($(PORT) + 1000))"; \
	  exit 1; fi
	@$(MAKE) --no-print-directory release
	@mkdir -p data
	redis-server redis.conf --port $(PORT)

## test: every test of the workspace (the module, the engine, the tool, the harness, the
## benchmark program): unit, property, vectors and integration against real servers; the
## criterion benches are compiled, not run. scripts/test.sh fetches the other servers into
## .deps/ (scripts/servers.sh), compiles every test binary once, and runs them all on
## redis-server (Debian's 7.0.15, or $RINGSLOT_SERVER), and those whose behaviour depends on
## the server again on Valkey 9.1.2 and Redis 8.2.3, several binaries at a time; it prints a
## line per binary and the time of each phase. RINGSLOT_VALKEY=skip or RINGSLOT_REDIS8=skip
## leaves a server out; target/test-<server>.log holds each server's output.
## servers: fetch valkey-server 9.1.2 and redis-server 8.2.3 into .deps/ (scripts/servers.sh)
servers: deps
	@./scripts/servers.sh

test: deps
	@./scripts/test.sh

## test-all: the same with every test binary on every server
test-all: deps
	@RINGSLOT_TEST_ALL=1 ./scripts/test.sh

## test-repeat: the tests against live servers REPEAT times in a row (default 20), stopping
## at the first failure: no test may depend on a timing window
REPEAT ?= 20
test-repeat: build
	$(CARGO) test --workspace --tests --no-run
	@for i in $$(seq 1 $(REPEAT)); do \
	  started=$$(date +%s); \
	  out=$$($(CARGO) test --workspace --tests -q 2>&1) || { \
	    echo "$$out" | grep -E -A 20 "panicked|FAILED" | head -80; \
	    echo "== test-repeat: run $$i of $(REPEAT) failed"; exit 1; }; \
	  echo "== test-repeat: run $$i of $(REPEAT) passed ($$(echo "$$out" | grep -c '^test result: ok') test binaries, $$(( $$(date +%s) - started )) s)"; \
	done

## soak: the long data-safety runs (100000 fuzzed calls that must leave rings unchanged,
## 20000 replicated writes with replica restarts, 20 SIGKILLs under appendfsync always,
## 20000 damaged DUMP payloads fed to RESTORE, and on Valkey 9.1.2 an atomic slot migration
## of a ring of 1M points); minutes, so not part of `make test`, which runs short versions of
## each
soak: build servers
	RINGSLOT_SOAK=1 $(CARGO) test --test module_soak --test module_errors --test module_payloads -- --nocapture
	RINGSLOT_SOAK=1 RINGSLOT_SERVER=$(VALKEY_SERVER) $(CARGO) test --test cluster_atomic_migration -- --nocapture

## lint: formatting and clippy, as CI would want them
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## bench: criterion benchmarks of the engine
bench: deps
	$(CARGO) bench -p ringslot-engine

clean:
	$(CARGO) clean

## bench-migration: members moved per scheme as a ring grows 4 -> 8 nodes over 100000 real
## keys, on a temporary redis-server; table on stdout, CSV and SVG in bench/out/.
## Extra flags: make bench-migration BENCH_ARGS="--scenario bench/scenario-example.txt"
BENCH_ARGS ?=
bench-migration: release
	$(CARGO) run --release -p ringslot-bench -- --module $(MODULE_RELEASE) --out bench/out \
	  migration --grow 4..8 --keys 100000 $(BENCH_ARGS)

## bench-balance: peak-to-mean share per scheme as virtual nodes grow 1 -> 1000, for 10 and
## 100 nodes; table on stdout, CSV and SVG in bench/out/.
bench-balance: release
	$(CARGO) run --release -p ringslot-bench -- --module $(MODULE_RELEASE) --out bench/out \
	  balance --nodes 10,100 $(BENCH_ARGS)

## bench-instructions: instructions and cache misses, counted by valgrind (steady where timings
## are not): an owner lookup per flavour (cachegrind), then where a RING.GET, RING.SLOT and the
## floor go in a redis-server under callgrind; bench/out/instructions.md
bench-instructions: release
	./scripts/instructions.sh

## bench-throughput: requests/s of RING.GET, RING.SLOT and RING.MGET against GET and PING
## (redis-benchmark, with and without pipelining), MEMORY USAGE per ring point and the time of
## DEBUG RELOAD with 100 rings, on a temporary redis-server; report on stdout and in
## bench/out/throughput.md.
bench-throughput: release
	$(CARGO) run --release -p ringslot-bench -- --module $(MODULE_RELEASE) --out bench/out \
	  throughput $(BENCH_ARGS)

## bench-throughput-ab: the same, with the module of commit BEFORE (default: the last one
## before issue 23's lookup layout) built in .deps/before and loaded into a second server on
## the same CPU, measured in the same rounds; adds before/after ratios to
## bench/out/throughput-ab.md.
BEFORE ?= f8a7f77
bench-throughput-ab: release
	scripts/build-at.sh $(BEFORE) .deps/before >/dev/null
	$(CARGO) run --release -p ringslot-bench -- --module $(MODULE_RELEASE) --out bench/out \
	  throughput --before-module .deps/before/target/release/libringslot.so \
	  --name throughput-ab $(BENCH_ARGS)

## bench-limits: what the module holds Redis' main thread for, on a temporary redis-server:
## bulk RING.ADD / RING.DEL of 100000 nodes against a rebuild, AOF replay against RDB load,
## what-ifs on a 10M-point ring and on a ring with a 64 KiB name, the ACL outcome of a
## keyspace walk, and the longest hold of every command at the default limits; report on
## stdout and in bench/out/limits.md.
bench-limits: release
	$(CARGO) run --release -p ringslot-bench -- --module $(MODULE_RELEASE) --out bench/out \
	  limits $(BENCH_ARGS)

## bench-whatif: RING.MOVES ... KEYS over 1M and 10M real keys in the background, beside the
## inline run (1M), with the PING latency another client sees; on a temporary redis-server
## (about 2 GB of memory); report on stdout and in bench/out/whatif.md.
bench-whatif: release
	$(CARGO) run --release -p ringslot-bench -- --module $(MODULE_RELEASE) --out bench/out \
	  whatif $(BENCH_ARGS)

## bench-apply: the plan by bytes carried out by `ringslot apply` beside redis-cli's rebalance,
## on two identical throw-away clusters (ports 30101-30104 and 30201-30204; KEYS keys of 16 B
## to 1 KiB, default 1000000, and HOT keys of one hot tag, default 20000, of 4 KiB): the time
## of each and each master's keys and used_memory after, and the commands each sent a slot
## (scripts/bench-apply.sh; ATOMIC=1 REDIS_SERVER=.../valkey-server for --atomic; REPLICAS=1
## for a replica per master; BY=slots: the apply carries out redis-cli's own plan, the same
## slots redis-cli moves; FIRST=redis-cli runs redis-cli's rebalance first; PACE=MS or
## PACE=auto: a third cluster applied with --max-latency; a client's PING latency throughout).
bench-apply: deps
	$(CARGO) build --release -p ringslot-tool --bin ringslot
	./scripts/bench-apply.sh

## bench-parallel: 3 masters to 6, the same slots (redis-cli's plan, BY=bytes for the plan by
## bytes) moved by `ringslot apply`, `ringslot apply --parallel N` (PARALLEL=N, 3) and
## `redis-cli --cluster rebalance` on three identical throw-away clusters (ports 30401-30426;
## KEYS keys, default 300000, HOT hot keys, 5000; REPLICAS=1: a replica per master;
## PACE=MS|auto: the parallel run paced by --max-latency; ATOMIC=1 with
## REDIS_SERVER=.deps/valkey-9.1.2/valkey-server: the two ringslot runs with --atomic): time,
## slots and MB a second, a client's PING latency during each (scripts/bench-parallel.sh).
bench-parallel: deps
	$(CARGO) build --release -p ringslot-tool --bin ringslot
	./scripts/bench-parallel.sh

## bench-relief: relieving a cluster near full (three masters with a replica each at 92% of
## their maxmemory, 150000 keys and big strings of 1 to 2 MiB, a fourth master joined, a client
## throughout): `ringslot predict --by memory` and `ringslot apply` beside `redis-cli --cluster
## rebalance` on identical throw-away clusters, three runs, the medians and their ratio;
## RINGSLOT_SERVER=... for Valkey or Redis 8.2; BENCH_ARGS="--policy allkeys-lru" for a cache.
## About 4 minutes on two cores.
bench-relief: deps
	$(CARGO) build --release -p ringslot-tool --bin ringslot
	$(CARGO) run --release -p ringslot-bench -- --out bench/out relief $(BENCH_ARGS)

## bench-status: `ringslot status` at 1 and 10 million keys beside `redis-cli --cluster check`
## (SIZES="1000000 10000000", REDIS_SERVER=... for Valkey or Redis 8.2; scripts/bench-status.sh).
bench-status: deps
	$(CARGO) build --release -p ringslot-tool --bin ringslot
	./scripts/bench-status.sh

## bench-netem: bench-parallel with each node, the mover and the client in a network namespace
## of its own, each packet held DELAY_US microseconds on its way out (tc netem; 150 by default,
## 0: the namespaces alone); needs root and a kernel with netem, else skipped with a message
## (scripts/bench-netem.sh).
bench-netem: deps
	$(CARGO) build --release -p ringslot-tool --bin ringslot
	./scripts/bench-netem.sh

## bench-predict-scale: `ringslot predict --rebalance --by bytes` at 1M, 3M and 10M keys
## (SIZES=...) with its default rate and sampling, on a throw-away cluster of 3 masters + 1
## (ports 30501-30504), then the plan applied and the truth (every key sized): the time and
## the peak-to-mean by real bytes (scripts/bench-predict-scale.sh; 10M keys take ~7 GB).
bench-predict-scale: deps
	$(CARGO) build --release -p ringslot-tool --bin ringslot
	./scripts/bench-predict-scale.sh

## bench-big-keys: the trial of issue 40 at full size on a throw-away cluster (ports
## 30301-30305: 3 masters, a joining master and its replica; KEYS keys, default 150000, a hash of
## FIELDS fields, default 400000, and a string of STRING_MB MiB, default 48): the longest command
## of the tool on each master while it predicts read-only and applies with the defaults, and
## the big keys' estimated DUMP bytes and holds against measured ones (scripts/bench-big-keys.sh;
## REDIS_SERVER=.../valkey-server for another server); report in bench/out/big-keys.md.
bench-big-keys: deps
	$(CARGO) build --release -p ringslot-tool --bin ringslot
	./scripts/bench-big-keys.sh

## bench-cluster: throw-away Redis Clusters on ports 30001 and up (1M keys of 16 B to 1 KiB,
## and a hot hash tag of 20000 keys of 4 KiB), where each change is predicted both ways
## (read-only and with the module), then made for real with redis-cli --cluster and compared,
## key by key and byte by byte: 3 -> 4, 3 -> 6 in one rebalance, 6 -> 4 (two drained in
## one), the rebalance pending after add-node; then 3 -> 4 at 100k and 300k keys; then the
## duration model's error on every run (cluster-fit). Every server is stopped at the end;
## reports in bench/out/cluster-*.{md,csv,svg}. On your own cluster, the operator's tool:
## ringslot predict --url redis://host:port --add ip:port (make dist, or cargo install --locked --path tool)
CLUSTER_KEYS ?= 1000000
BENCH_RELEASE = $(CARGO) run --release -p ringslot-bench -- --module $(MODULE_RELEASE) --out bench/out
bench-cluster: release
	rm -f bench/out/cluster-*-run.csv
	$(BENCH_RELEASE) cluster --local 3 --join 1 --keys $(CLUSTER_KEYS) --hot-keys 20000 \
	  --both-modes --name cluster-3-4 $(BENCH_ARGS)
	$(BENCH_RELEASE) cluster --local 3 --join 3 --keys $(CLUSTER_KEYS) --hot-keys 20000 \
	  --both-modes --name cluster-3-6 $(BENCH_ARGS)
	$(BENCH_RELEASE) cluster --local 6 --leave 2 --keys $(CLUSTER_KEYS) --hot-keys 20000 \
	  --both-modes --name cluster-6-4 $(BENCH_ARGS)
	$(BENCH_RELEASE) cluster --local 3 --join 1 --pending --keys $(CLUSTER_KEYS) \
	  --hot-keys 20000 --both-modes --name cluster-pending $(BENCH_ARGS)
	$(BENCH_RELEASE) cluster --local 3 --join 1 --keys 100000 --name cluster-3-4-100k $(BENCH_ARGS)
	$(BENCH_RELEASE) cluster --local 3 --join 1 --keys 300000 --name cluster-3-4-300k $(BENCH_ARGS)
	$(BENCH_RELEASE) cluster-fit bench/out/cluster-*-run.csv

## bench-cluster-atomic: per key against atomic on Valkey 9.1.2 (make servers fetches it):
## the same changes on the same keys (1M keys and a hot tag of 20000 keys of 4 KiB; 3 -> 4 and
## 3 -> 6), once made by redis-cli (per key) and once by valkey-cli's atomic path (one CLUSTER
## MIGRATESLOTS a move, polled every 100 ms), each predicted first: duration and each master's
## used_memory now, at its peak and at the end; then smaller runs for the atomic model's fit.
## Reports in bench/out/atomic-*.{md,csv,svg}.
BENCH_VALKEY = $(CARGO) run --release -p ringslot-bench -- --redis-server $(VALKEY_SERVER) \
  --module $(MODULE_RELEASE) --out bench/out
bench-cluster-atomic: release servers
	rm -f bench/out/atomic-*-run.csv
	$(BENCH_VALKEY) cluster --local 3 --join 1 --keys $(CLUSTER_KEYS) --hot-keys 20000 \
	  --name atomic-3-4-per-key $(BENCH_ARGS)
	$(BENCH_VALKEY) cluster --local 3 --join 1 --keys $(CLUSTER_KEYS) --hot-keys 20000 \
	  --atomic --name atomic-3-4-atomic $(BENCH_ARGS)
	$(BENCH_VALKEY) cluster --local 3 --join 3 --keys $(CLUSTER_KEYS) --hot-keys 20000 \
	  --name atomic-3-6-per-key $(BENCH_ARGS)
	$(BENCH_VALKEY) cluster --local 3 --join 3 --keys $(CLUSTER_KEYS) --hot-keys 20000 \
	  --atomic --name atomic-3-6-atomic $(BENCH_ARGS)
	$(BENCH_VALKEY) cluster --local 3 --join 1 --keys 100000 --atomic \
	  --name atomic-3-4-100k $(BENCH_ARGS)
	$(BENCH_VALKEY) cluster --local 6 --leave 2 --keys 300000 --atomic \
	  --name atomic-6-4-300k $(BENCH_ARGS)

## bench-cluster-duration: the per-key duration estimate against real redis-cli rebalances on
## Redis 7.0.15, Valkey 9.1.2 and Redis 8.2.3, idle and with one core kept busy (--busy), at
## 100k and 1M keys (3 -> 4, read-only prediction), three runs each; then each run's error,
## the median per group and whether each run fell inside the range (cluster-fit). Reports in
## bench/out/duration/. About an hour.
DURATION_RUNS ?= 1 2 3
BENCH_BIN := target/release/ringslot-bench
bench-cluster-duration: release servers
	$(CARGO) build --release -p ringslot-bench
	rm -rf bench/out/duration && mkdir -p bench/out/duration
	for server in redis-server $(VALKEY_SERVER) $(REDIS8_SERVER); do \
	  tag=$$(basename $$(dirname $$server)); [ "$$server" = redis-server ] && tag=redis-7.0.15; \
	  for keys in 100000 1000000; do for cond in idle busy; do for i in $(DURATION_RUNS); do \
	    flag=""; [ $$cond = busy ] && flag=--busy; \
	    $(BENCH_BIN) --redis-server $$server --module $(MODULE_RELEASE) --out bench/out/duration \
	      cluster --local 3 --join 1 --keys $$keys $$flag --name $$tag-$$keys-$$cond-$$i \
	      > /dev/null || exit 1; \
	  done; done; done; \
	done
	$(BENCH_BIN) cluster-fit bench/out/duration/*-run.csv | tee bench/out/duration/fit.md

## bench-cluster-fit: the calibration of the per-key duration model
## (tool/src/predict/duration.rs): per server (Redis 7.0.15, Valkey 9.1.2, Redis 8.2.3), idle and
## busy, local runs that vary the slots, the masters and the keys a slot (3 -> 4 at 30k and 300k
## keys, 3 -> 6 at 30k), and a least squares fit per server over them (its constants go into
## duration::per_key; bench-cluster-duration measures its error on other runs).
bench-cluster-fit: release servers
	$(CARGO) build --release -p ringslot-bench
	rm -rf bench/out/fit && mkdir -p bench/out/fit
	for server in redis-server $(VALKEY_SERVER) $(REDIS8_SERVER); do \
	  tag=$$(basename $$(dirname $$server)); [ "$$server" = redis-server ] && tag=redis-7.0.15; \
	  for cond in idle busy; do \
	    flag=""; [ $$cond = busy ] && flag=--busy; \
	    for change in "3 --join 1 --keys 30000" "3 --join 1 --keys 300000" "3 --join 3 --keys 30000"; do \
	      $(BENCH_BIN) --redis-server $$server --module $(MODULE_RELEASE) --out bench/out/fit \
	        cluster --local $$change $$flag --name $$tag-$$(echo $$change | tr -d ' -')-$$cond \
	        > /dev/null || exit 1; \
	    done; \
	  done; \
	done
	$(BENCH_BIN) cluster-fit bench/out/fit/*-run.csv

## bench-cache: a cache fleet on loopback (4 redis-server backends with 8 MiB each, LFU
## eviction and the module, behind twemproxy with ketama and with modula, hash md5; and 4
## memcached servers of 8 MiB behind nginx's hash $arg_key consistent), a Zipf workload
## (100000 keys, s = 0.99, 100-1000 B values) read through the proxy: one backend joins, then
## one leaves; ringslot's predicted extra miss share against the measured one, the new steady
## level and the transient, and the same keys' migration on a 4-master Redis Cluster; then
## two more seeds (without the cluster side). Reports in bench/out/cache*.{md,csv,svg}.
bench-cache: release
	$(BENCH_RELEASE) cache --local --distributions ketama,modula,nginx $(BENCH_ARGS)
	$(BENCH_RELEASE) cache --local --no-cluster --distributions ketama,modula,nginx --seed 2 --name cache-seed2 $(BENCH_ARGS)
	$(BENCH_RELEASE) cache --local --no-cluster --distributions ketama,modula,nginx --seed 3 --name cache-seed3 $(BENCH_ARGS)

## bench-compat: what one node joining and one leaving costs under the placements of nginx,
## HAProxy, Envoy, mcrouter, Predis, redis-rb, go-redis, pymemcache, python-memcached and
## libmemcached, beside the slots and hash mod N, at 4, 10 and 100 nodes; on a temporary redis-server; report on stdout and in bench/out/compat.{md,csv}.
bench-compat: release
	$(CARGO) run --release -p ringslot-bench -- --module $(MODULE_RELEASE) --out bench/out \
	  compat $(BENCH_ARGS)

## bench-spread: spread and load (Karger et al. 1997) of the native, ketama, groupcache and
## native-fnv rings, the slot table and modulo, over 40 random subsets of 20 nodes and over
## the 41 node sets of a 40-step join/leave history, 50000 members; on a temporary
## redis-server; report on stdout and in bench/out/spread.{md,csv,svg}.
bench-spread: release
	$(CARGO) run --release -p ringslot-bench -- --module $(MODULE_RELEASE) --out bench/out \
	  spread $(BENCH_ARGS)
