# lockbreaker: `make run` runs the default Kleppmann scenario, `make test` runs every test.
# Both work on a fresh machine: `deps` installs what the node image build needs.

GO      ?= go
BIN     := bin/lockbreaker
RESULTS ?= store

# The version and commit stamped into the binary, which `lockbreaker version` prints: a
# build without VCS information (-buildvcs=false) still names both. Read from git only by
# the targets that build.
VERSION ?= $(or $(shell git describe --tags --always --dirty 2>/dev/null),devel)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
STAMP    = -X github.com/lockbreaker/lockbreaker/cli.stampedVersion=$(VERSION) -X github.com/lockbreaker/lockbreaker/cli.stampedCommit=$(COMMIT)

.PHONY: run test test-long unit bench load deps deps-run build dist image clean vet fuzz serve nightly known-bugs kleppmann-time

build:
	$(GO) build -ldflags '$(STAMP)' -o $(BIN) ./cmd/lockbreaker

# A release archive, for those who download lockbreaker instead of building it:
# $(DIST)/lockbreaker-VERSION-linux-ARCH.tar.gz holds the binary (static: nothing in it
# needs cgo), its SHA-256 (lockbreaker.sha256), README.md and LICENSE, and beside it lies
# the archive's own .sha256, for `sha256sum -c`. The binary needs nothing else of the
# repository (the node image's files are compiled into it) and runs from any directory.
# One commit built twice with the same Go gives the same archive: paths trimmed, files in a
# fixed order, owned by root, writable by it alone, dated at the commit.
DIST ?= dist
ARCH ?= $(shell $(GO) env GOARCH)
RELEASE = lockbreaker-$(VERSION)-linux-$(ARCH)
dist:
	@rm -rf $(DIST)/$(RELEASE) && mkdir -p $(DIST)/$(RELEASE)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build -trimpath -ldflags '-s -w $(STAMP)' -o $(DIST)/$(RELEASE)/lockbreaker ./cmd/lockbreaker
	@date=$$(git log -1 --format=%ct 2>/dev/null || echo 0); \
	cp README.md LICENSE $(DIST)/$(RELEASE)/ && cd $(DIST)/$(RELEASE) && \
	sha256sum lockbreaker >lockbreaker.sha256 && \
	tar --owner=0 --group=0 --numeric-owner --mode=go-w --mtime=@$$date \
		-cf ../$(RELEASE).tar lockbreaker lockbreaker.sha256 README.md LICENSE && \
	cd .. && gzip -nf $(RELEASE).tar && sha256sum $(RELEASE).tar.gz >$(RELEASE).tar.gz.sha256 && rm -r $(RELEASE)
	@echo "$(DIST)/$(RELEASE).tar.gz (check it: cd $(DIST) && sha256sum -c $(RELEASE).tar.gz.sha256)"

# The node image is made from Debian packages; with no registry, by mmdebstrap, which a
# fresh machine may lack. Lock clients join the cluster network with
# ip and nsenter and are cut with iptables. That is all a run needs (deps-run); the tests
# also open reports in Chromium, drive etcd 3.4's own lock through Debian's etcdctl
# (examples/known-bugs), and run the Python lock clients in examples/python, which
# use Debian's redis-py and kazoo through Debian's own python3 (/usr/bin/python3, which
# another python3 on PATH may not be), and the Java one in examples/java, compiled with
# Debian's JDK against Debian's Curator and ZooKeeper jars (/usr/share/java; no Maven).
deps-run:
	@missing=""; \
	command -v mmdebstrap >/dev/null 2>&1 || missing="$$missing mmdebstrap"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v nsenter >/dev/null 2>&1 || missing="$$missing util-linux"; \
	command -v iptables >/dev/null 2>&1 || missing="$$missing iptables"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

deps: deps-run
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	/usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || missing="$$missing python3-redis"; \
	/usr/bin/python3 -c 'import kazoo' >/dev/null 2>&1 || missing="$$missing python3-kazoo"; \
	/usr/bin/python3 -c 'import etcd3' >/dev/null 2>&1 || missing="$$missing python3-etcd3"; \
	command -v etcdctl >/dev/null 2>&1 || missing="$$missing etcd-client"; \
	command -v javac >/dev/null 2>&1 || missing="$$missing openjdk-17-jdk-headless"; \
	for jar in curator-recipes:libcurator-recipes-java curator-framework:libcurator-framework-java \
		curator-client:libcurator-client-java zookeeper:libzookeeper-java jackson-databind:libjackson2-databind-java; do \
		test -r /usr/share/java/$${jar%%:*}.jar || missing="$$missing $${jar#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

image: deps-run build
	$(BIN) images

# Kleppmann's GC pause on a single Redis without fencing, ended a second after its first
# violation. Exit 1 (violations found) is the expected outcome, so it does not fail the
# target; 2 (unknown) and 255 (harness error) do.
run: deps-run build
	@$(BIN) run --stop-at-first-violation --results $(RESULTS); code=$$?; \
	if [ $$code -le 1 ]; then echo "(exit $$code: 0 = lock held up, 1 = violations found, as Kleppmann predicts)"; \
	else exit $$code; fi

# go test starts packages in the order given, two at a time, and the machine is busy
# throughout (more at once would only share the same two cores): harness (the longest)
# first, and beside it containers then cli. cli's runs killed at random moments start
# after containers, not beside harness's first tests, whose faults must land within a
# lease. The module's other packages run in a second go test, after the examples: behind
# cli they would wait for its end while the machine had room (a minute of make test).
HEAVY  := ./harness ./containers ./cli
MODULE := github.com/lockbreaker/lockbreaker

# The node image is built first (with its progress shown), so no test waits on it.
# Packages run two at a time: every run has its own containers, network and addresses,
# and a test's clean removes only its own runs. Within harness the container tests run
# in lanes (harness/lanes_test.go), nine tests at most at once. The examples run beside
# them: most of their time is spent waiting on leases. examples/ is a module of its own (a
# user's lock built with lockbreaker.Main, and Python and Java locks run over the exec protocol),
# which ./... does not reach; nor is third_party/porcupine (our copy, with its own tests, whose
# upstream searches of ten clients' histories run in the long tier). The machine is busy
# throughout, so nothing is done twice: vet has run (go test's own is off) and the tests that
# run lockbreaker as a user would run the binary just built (LOCKBREAKER_TEST_BIN), not
# each a copy of their own; test binaries are linked without debugger tables (-w, a
# quarter of each link), which stack traces do not need.
TESTFLAGS := -count=1 -vet=off -ldflags=-w

test: deps vet image
	@export LOCKBREAKER_TEST_BIN=$(CURDIR)/$(BIN); \
	rest=$$($(GO) list ./... | grep -vxE '$(MODULE)/(harness|containers|cli)') || exit 255; \
	$(GO) test $(TESTFLAGS) -p 2 -parallel 9 -timeout 28m $(HEAVY) & main=$$!; \
	(cd examples && $(GO) test $(TESTFLAGS) -timeout 10m ./...) && \
	(cd third_party/porcupine && $(GO) test $(TESTFLAGS) -short -timeout 10m ./...) && \
	$(GO) test $(TESTFLAGS) -p 2 -parallel 9 -timeout 10m $$rest; others=$$?; \
	wait $$main; main=$$?; \
	test $$main -eq 0 && test $$others -eq 0

# The long tier (not in make test): today's whole scenario matrix on real containers and
# the examples' every cell and comparison (LOCKBREAKER_LONG=1). A test of a targeted fault
# tries up to four seeds for its danger (harness; the examples five); the table at the end counts, per test, on which
# try it came: how often each fault brings its danger, at run's defaults, on this machine.
LONGLOG ?= $(or $(TMPDIR),/tmp)/lockbreaker-long.log
test-long: deps vet image
	@export LOCKBREAKER_LONG=1 LOCKBREAKER_TEST_BIN=$(CURDIR)/$(BIN); \
	$(GO) test $(TESTFLAGS) -p 2 -parallel 9 -v -timeout 90m $(HEAVY) ./checkers ./workloads ./... >$(LONGLOG) 2>&1; main=$$?; \
	(cd examples && $(GO) test $(TESTFLAGS) -v -timeout 30m ./...) >>$(LONGLOG) 2>&1 && \
	(cd third_party/porcupine && $(GO) test $(TESTFLAGS) -timeout 10m ./...) >>$(LONGLOG) 2>&1; others=$$?; \
	grep -E '^(--- FAIL|FAIL|ok )' $(LONGLOG); \
	echo "danger per test (make test-long, log in $(LONGLOG)):"; \
	grep -oE 'danger: [^ ]+ (came on try [0-9]+|never came)' $(LONGLOG) | sed 's/^danger: //' | sort | uniq -c; \
	test $$main -eq 0 && test $$others -eq 0

# The tests that need no Docker, with the binary built once for those that run it.
unit: build
	@export LOCKBREAKER_TEST_BIN=$(CURDIR)/$(BIN); \
	$(GO) test -count=1 -short ./... && \
	(cd examples && $(GO) test -count=1 -short ./...) && \
	(cd third_party/porcupine && $(GO) test -count=1 -short ./...)

# The long tier, for a nightly job (not in make test): the whole kleppmann suite, SEEDS
# runs per cell, only the SHARD-th of its parts (one per CI runner), PARALLEL runs at once
# (default: suite's). Its exit code is the suite's: 0 when every cell met its expectation,
# 1 when one did not, 2 when one could not say. The matrix is store/suite-kleppmann/<time>/suite.html, beside its junit.xml.
# The shards' stores are joined into one matrix by `bin/lockbreaker suite merge STORE...`
# (the workflow's last job); `bin/lockbreaker suite compare OLD NEW` exits 1 when a cell
# regressed since an earlier run, and the store's index.html shows every suite's trend.
SEEDS ?= 5
SHARD ?= 1/1
nightly: deps-run image
	$(BIN) suite kleppmann --seeds $(SEEDS) --shard $(SHARD)$(if $(PARALLEL), --parallel $(PARALLEL)) --results $(RESULTS)

# The known bugs (suites/known-bugs.yaml, docs/known-bugs.md): each lock bug users reported,
# on a version that has it and the version or control that fixed it, SEEDS runs per cell,
# one at a time. Its exit code is the suite's. In the long tier and the nightly job, not in
# make test.
known-bugs: deps image
	examples/known-bugs/redsync_lock --build
	$(BIN) suite suites/known-bugs.yaml --seeds $(SEEDS) --parallel 1 --results $(RESULTS)

# The targeted faults' cells (SUITE: suites/targeted.yaml, locks known to break under them,
# at run's defaults, unfenced; suites/slow.yaml, the network's delayed write) with BUSY
# processes hashing beside them at normal priority, as a shared CI runner has; BUSY=0 is a
# quiet machine. SEEDS runs per cell, one at a time. Its exit code is the suite's: 0 when
# every cell met its expectation in its threshold of runs.
BUSY ?= 2
SUITE ?= suites/targeted.yaml
load: deps-run image
	@pids=""; trap 'kill $$pids 2>/dev/null' EXIT; \
	for i in $$(seq 1 $(BUSY)); do sha256sum /dev/zero & pids="$$pids $$!"; done; \
	$(BIN) suite $(SUITE) --seeds $(SEEDS) --parallel 1 --results $(RESULTS)

# The whole kleppmann suite once, as a test that logs its wall time (its times: docs/load.md).
kleppmann-time: deps image
	LOCKBREAKER_KLEPPMANN=1 $(GO) test -count=1 -v -timeout 60m -run '^TestKleppmannSuiteWithOneSeed$$' ./cli/

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	cd examples && $(GO) vet ./...
	cd examples/known-bugs/redsync && $(GO) vet ./...
	cd third_party/porcupine && $(GO) vet ./...

# Each checker once on generated histories (ns/op, B/op), then the whole `lockbreaker
# check` of generated run directories: wall time, peak memory (max RSS) and verdicts per
# history;
# then the harness's own cost: the recording path (worker -> history.jsonl) at full rate,
# and a run at --rate 0 against a bare loop making the same requests (real Redis node);
# then an acquire and release through the exec protocol (docs/protocol.md) against the
# same Go lock called in-process, and redis-py's Lock through it (real Redis node).
BENCHDIR ?= $(or $(TMPDIR),/tmp)/lockbreaker-bench
# ops:clients of the generated histories checked, each with fencing off and on; those of
# up to BENCHWHOLE operations are also judged whole (check --whole, about 2.5 KB an
# operation), which must give the verdicts of the pieces.
BENCHWHOLE ?= 1000000
BENCHCHECKS ?= 100000:5 100000:20 100000:50 1000000:5 1000000:20 1000000:50 10000000:5 10000000:20 10000000:50
bench: deps image
	$(GO) test -run '^$$' -bench . -benchtime 1x -benchmem ./checkers/
	@mkdir -p $(BENCHDIR)
	$(GO) build -o $(BENCHDIR)/lockbreaker ./cmd/lockbreaker
	$(GO) build -o $(BENCHDIR)/histgen ./history/histgen/cmd/histgen
	@for run in $(BENCHCHECKS); do ops=$${run%:*}; clients=$${run#*:}; \
	  for fencing in false true; do dir=$(BENCHDIR)/run-$$ops-$$clients-$$fencing; rm -rf $$dir; \
	    $(BENCHDIR)/histgen -ops $$ops -clients $$clients -fencing=$$fencing $$dir || exit 1; \
	    /usr/bin/time -f "%e s (%U s user), max RSS %M KB" -o $$dir/time $(BENCHDIR)/lockbreaker check $$dir >$$dir/check.txt 2>&1; \
	    verdicts=$$(grep -E '^  [a-z-]+ +[A-Z-]+' $$dir/check.txt | awk '{printf "%s=%s ", $$1, $$2}'); same=""; \
	    if [ $$ops -le $(BENCHWHOLE) ]; then \
	      $(BENCHDIR)/lockbreaker check --whole $$dir >$$dir/whole.txt 2>&1; \
	      whole=$$(grep -E '^  [a-z-]+ +[A-Z-]+' $$dir/whole.txt | awk '{printf "%s=%s ", $$1, $$2}'); \
	      if [ "$$whole" = "$$verdicts" ]; then same="; judged whole: the same"; else same="; judged whole: DIFFERENT: $$whole"; fi; \
	    fi; \
	    printf 'check ops=%-8s clients=%-3s fencing=%-6s %s; %s%s\n' $$ops $$clients $$fencing "$$(cat $$dir/time | tail -1)" "$$verdicts" "$$same"; \
	  done; done
	@# The judge keeps up: check of a million fenced operations against one sha256sum pass over
	@# the same history (issue 58: at most 3 times): the medians of 5 rounds of both, one after
	@# another, since one pass of each varies on a shared machine.
	@dir=$(BENCHDIR)/run-1000000-5-true; \
	test -f $$dir/history.jsonl || $(BENCHDIR)/histgen -ops 1000000 -clients 5 -fencing=true $$dir || exit 1; \
	rm -f $$dir/sha.times $$dir/check.times; \
	for round in 1 2 3 4 5; do \
	  /usr/bin/time -f %e -a -o $$dir/sha.times sha256sum $$dir/history.jsonl >/dev/null; \
	  /usr/bin/time -f %e -a -o $$dir/check.times $(BENCHDIR)/lockbreaker check $$dir >/dev/null 2>&1; \
	done; \
	sha=$$(grep -E "^[0-9.]+$$" $$dir/sha.times | sort -n | sed -n 3p); check=$$(grep -E "^[0-9.]+$$" $$dir/check.times | sort -n | sed -n 3p); mb=$$(( $$(stat -c %s $$dir/history.jsonl) / 1000000 )); \
	echo "check ops=1000000 clients=5 fencing=true: $$check s, sha256sum of its $$mb MB history $$sha s (medians of 5): $$(awk "BEGIN {printf \"%.1f\", $$check / $$sha}") times (goal: at most 3)"
	$(GO) test -p 1 -run '^$$' -bench 'RecordingPath' -benchtime 200000x ./harness/
	$(GO) test -p 1 -run '^$$' -bench 'RunVersusBareLoop' -benchtime 1x ./harness/
	$(GO) test -p 1 -run '^$$' -bench 'ExecRoundTrip' -benchtime 2000x ./workloads/execlock/
	$(GO) test -p 1 -run '^$$' -bench 'StorageRoundTrip' -benchtime 5000x ./links/
	@# A soak: the harness's resident memory (VmRSS of /proc/PID/status, sampled each second) at 1,
	@# 5 and 15 minutes of a full-rate run on the in-process lock, and its peak (VmHWM) over the
	@# run and the analysis after it (a process that has ended has none); the history is on disk, so
	@# the first three should be level.
	@dir=$(BENCHDIR)/soak; rm -rf $$dir; mkdir -p $$dir; \
	$(BENCHDIR)/lockbreaker run --system local --nemesis none --clients 5 --rate 0 --work 0 --time-limit 15m30s \
	  --results $$dir >$$dir/run.txt 2>&1 & pid=$$!; start=$$(date +%s); marks="60 300 900"; at=""; peak=0; \
	while hwm=$$(awk '/^VmHWM/ {print int($$2/1024)}' /proc/$$pid/status 2>/dev/null) && [ -n "$$hwm" ]; do \
	  rss=$$(awk '/^VmRSS/ {print int($$2/1024)}' /proc/$$pid/status 2>/dev/null); peak=$$hwm; \
	  mark=$${marks%% *}; if [ -n "$$marks" ] && [ $$(( $$(date +%s) - start )) -ge $$mark ]; then \
	    at="$$at $$((mark / 60)) min $$rss MB,"; marks=$$(echo $${marks#$$mark}); fi; \
	  sleep 1; done; \
	wait $$pid; ops=$$(grep -c '"type":"ok"' $$dir/latest/history.jsonl); \
	echo "soak (local, 5 clients, --rate 0 --work 0): harness RSS$$at peak $$peak MB; $$ops ok operations"

# Each fuzz target runs for FUZZTIME; an input that fails lands in the package's
# testdata/fuzz/<target>/, to commit with the fix so it stays a test.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./history/
	$(GO) test -run '^$$' -fuzz '^FuzzCheckers$$' -fuzztime $(FUZZTIME) ./checkers/

clean: build
	$(BIN) clean

# The run store, read-only, on http://127.0.0.1:8080/: the index of every run, each report.
serve: build
	$(BIN) serve --results $(RESULTS)
