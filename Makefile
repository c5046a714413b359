# Entry points of the testbed. Every target that runs code first runs `setup`, which is
# idempotent and fast once done (scripts/setup.sh).
#
#   make run topo=spineleaf [spines=2 leaves=2 hosts=2 target=softswitch bw=3 elements=65536 elems=252]
#   make run bw=100M fabric_bw=50M delay=2us loss=0.1 intra_bw=150GB/s
#            (rates: k/M/G/T bit/s, B/s for bytes, a bare number is Mbit/s; delays: ns/us/ms/s)
#   make run bw=100G delay=2us tdf=auto   (time dilation: auto, the default, calibrates; or N)
#   make run bw=100G delay=2us settle=4   (check at twice the TDF until the times hold)
#   make run egress=random seed=7   (built-in target: BMv2-like random egress order, seeded)
#   make run cc_start=line   (congestion windows start whole, as RoCE NICs at line rate)
#   make run engine=c   (built-in target: the compiled C data path; io=python: its Python loop)
#   make run topo=fattree params="k=2"      (a shipped file by name, or topo=path/to/file.yaml)
#   make test [PYTEST_ARGS="-k lpm -x"]
#   make bench [BENCH_ARGS="--seconds 5"]
#   make experiments [EXP_ARGS="--algos ring,innetwork-hier --sizes 262144 --models ''"]
#   make experiments preset=size   (a paper's figure beside ns-3; the presets:
#                                   python -m experiment figure --list; docs/reproduction.md)
#   make scenario [SCENARIO=scenarios/examples/rack-loss.yaml JUNIT=results/junit.xml]
#   make run live=8080 (live view port; 0: a free one, the default; off: none)
#   make run topo=spineleaf servers=A,B [ssh_config=FILE]   (across machines: docs/scale.md)
#   make soak [SOAK_ARGS="--quick"]   (reliability campaign -> docs/reliability.md)
#   make toolchain [SRC=DIR PREFIX=/usr/local BMV2_FAST=1 BMV2_FAST_PREFIX=DIR JOBS=N]
#                  (p4c, PI, BMv2 from source at scripts/p4-toolchain.lock's pins; 60-90 min)
#   make toolchain-check   (installed vs pinned; exit 1 if missing)
#   make stubs   (rewrite typings/: the P4Runtime protobufs' type stubs, for mypy)

SHELL := /bin/bash
PY := .venv/bin/python
# Python writes bytecode for what it imports here, whatever the environment says: with
# PYTHONDONTWRITEBYTECODE set (as on the CI machine) every process compiled the project's
# modules again, and every pytest worker rewrote the 150 test modules' asserts (10 s of CPU a
# worker); __pycache__ is ignored by git. scripts/setup.sh compiles the project beforehand.
unexport PYTHONDONTWRITEBYTECODE

# Options of `make run`, passed through as --topo, --spines, ... when set.
topo ?=
spines ?=
leaves ?=
hosts ?=
target ?=
# Emulated links: rates with k/M/G/T (bw=3 is 3 Mbit/s), delays with ns/us/ms/s.
bw ?=
fabric_bw ?=
delay ?=
loss ?=
intra_bw ?=
# time-dilation factor: auto (calibrated, the default) or a number >= 1; recalibrate=1
tdf ?=
recalibrate ?=
# settle=N: run the all-reduces again at twice the TDF, at most N times, until the times hold
settle ?=
elements ?=
elems ?=
# Built-in target's egress order (sync, fifo, random) and the seed of random.
egress ?=
seed ?=
# Built-in target's packet engine (c, python; default $SOFTSWITCH_ENGINE, else c) and
# packet loop with the C engine (c, python).
engine ?=
io ?=
# Where the in-network agents' and the RoCE ring's congestion windows start: slow (the
# default) or line (the whole window at once, as RoCE NICs with DCQCN)
cc_start ?=
# delay_nodes=1: link delays by delay nodes even where netem or the switches could (testing)
delay_nodes ?=
# Machines to run the topology across (Mininet's cluster edition; docs/scale.md) and the ssh
# client config every ssh is given.
servers ?=
ssh_config ?=
# The live view's port (0: a free one; off: none); make run, experiments and train print its URL.
live ?= 0
# make scenario: the scenario files and where the JUnit XML goes
SCENARIO ?= scenarios/examples/rack-exact.yaml scenarios/examples/rack-loss.yaml \
	scenarios/examples/rack-restart.yaml
JUNIT ?= results/scenarios/junit.xml
params ?=
# make experiments preset=NAME: one of the papers' figures (python -m experiment figure --list)
preset ?=
PYTEST_ARGS ?=
TEST_JOBS ?=
BENCH_ARGS ?=
EXP_ARGS ?=
SOAK_ARGS ?=
SIM_ARGS ?= all
# make toolchain: local source trees instead of GitHub (SRC), install prefix, BMv2's
# performance build instead of (BMV2_FAST=1) or beside (BMV2_FAST_PREFIX=DIR) its default one,
# compile jobs (empty: the installer's default)
SRC ?=
PREFIX ?= /usr/local
BMV2_FAST ?= 0
BMV2_FAST_PREFIX ?=
JOBS ?=
TOOLCHAIN_VARS = SRC='$(SRC)' PREFIX='$(PREFIX)' BMV2_FAST='$(BMV2_FAST)' \
	BMV2_FAST_PREFIX='$(BMV2_FAST_PREFIX)' JOBS='$(JOBS)'
# make train: the papers' network (100 GbE, 2 us links) under calibrated time dilation; a
# global batch of 128 (44 steps to ~93 %): each step costs seconds of real time at the
# TDF microsecond links need on this machine (docs/training.md, "In the papers' network").
# The 10 Mbit/s network of before: TRAIN_ARGS="--bw 10 --epochs 8 --tdf 1".
TRAIN_ARGS ?= --collectives fp32-ring,inswitch,mstopk,hybrid --bw 100G --delay 2us \
	--batch 128 --lr 0.2 --epochs 4 --interference-repeats 3 \
	--plot docs/img/train_accuracy_vs_time.png

RUN_ARGS := $(strip $(if $(topo),--topo $(topo)) $(if $(spines),--spines $(spines)) \
	$(if $(leaves),--leaves $(leaves)) $(if $(hosts),--hosts $(hosts)) \
	$(if $(target),--target $(target)) $(if $(bw),--bw $(bw)) \
	$(if $(fabric_bw),--fabric-bw $(fabric_bw)) $(if $(delay),--delay $(delay)) \
	$(if $(loss),--loss $(loss)) $(if $(intra_bw),--intra-bw $(intra_bw)) \
	$(if $(tdf),--tdf $(tdf)) $(if $(recalibrate),--recalibrate) $(if $(settle),--settle $(settle)) \
	$(if $(elements),--elements $(elements)) $(if $(elems),--elems $(elems)) \
	$(if $(egress),--egress-order $(egress)) $(if $(seed),--seed $(seed)) \
	$(if $(engine),--engine $(engine)) $(if $(io),--io $(io)) \
	$(if $(baseline),--baseline-transport $(baseline)) $(if $(cc_start),--cc-start $(cc_start)) \
	$(if $(delay_nodes),--delay-nodes) $(foreach p,$(params),--param $(p)) \
	$(if $(servers),--servers $(servers)) $(if $(ssh_config),--ssh-config $(ssh_config)))

.PHONY: help setup test run bench experiments train sim scenario soak lint stubs clean distclean \
	toolchain toolchain-check

help:
	@echo "make run topo=spineleaf   start a topology, run both all-reduces (options: spines leaves hosts target bw fabric_bw delay loss intra_bw elements elems egress seed engine io params)"
	@echo "                          bw=100G fabric_bw=25G (k/M/G/T bit/s; bw=3 is 3 Mbit/s), delay=2us (ns/us/ms/s), intra_bw=150GB/s"
	@echo "                          tdf=auto|N: time dilation (auto calibrates once per program and machine; recalibrate=1)"
	@echo "                          topo = rack, spineleaf, spineleaf-oversub, fattree or a topology file; params=\"k=2 ...\""
	@echo "                          servers=A,B[,...] [ssh_config=FILE]: across machines (docs/scale.md)"
	@echo "make test                 run the whole test suite (PYTEST_ARGS=... to narrow it, TEST_JOBS=1 without workers)"
	@echo "make bench                run the benchmarks and rewrite docs/benchmarks.md"
	@echo "make experiments          algorithms x sizes x models on a spine-leaf (root; EXP_ARGS=...)"
	@echo "                          preset=NAME: a paper's figure, emulated beside ns-3 (python -m experiment figure --list; docs/reproduction.md)"
	@echo "make train                train the digits MLP with each collective on a spine-leaf in the papers' network (root; TRAIN_ARGS=...)"
	@echo "make scenario             run scenario files for CI, JUnit XML (root; SCENARIO=FILES JUNIT=PATH)"
	@echo "make soak                 full reliability campaign, one process, ~100 min: loss/reordering on both targets, switch/controller restarts, teardown, bad input -> docs/reliability.md (root; SOAK_ARGS=--quick: ~1 min)"
	@echo "make sim                  simulate the collectives at scale on ns-3 (SIM_ARGS=all|scaling|...)"
	@echo "make setup                install system packages, .venv and this project (idempotent)"
	@echo "make toolchain            build and install p4c, PI and BMv2 at the pinned revisions (60-90 min; SRC=DIR PREFIX BMV2_FAST=1 BMV2_FAST_PREFIX=DIR JOBS=N)"
	@echo "make toolchain-check      what of the P4 toolchain is installed, against the pins (exit 1 if missing)"
	@echo "make lint                 ruff check, the layering contract (lint-imports), mypy"
	@echo "make stubs                regenerate typings/ (P4Runtime protobuf stubs) from the installed p4runtime"
	@echo "make clean                remove build outputs, caches, logs/, pcaps/, run/"
	@echo "make distclean            clean, and remove .venv"

setup:
	@bash scripts/setup.sh

test: setup
	@TEST_JOBS=$(TEST_JOBS) bash scripts/run_tests.sh $(PYTEST_ARGS)

run: setup
	INA_LIVE_PORT=$(live) $(PY) -m experiment.run $(RUN_ARGS)

bench: setup
	$(PY) -m bench $(BENCH_ARGS)

experiments: setup
	INA_LIVE_PORT=$(live) $(PY) -m experiment $(if $(preset),figure $(preset),matrix) $(EXP_ARGS)

train: setup
	INA_LIVE_PORT=$(live) $(PY) -m train compare --topo spineleaf $(TRAIN_ARGS)

sim: setup
	$(PY) -m sim sweep $(SIM_ARGS)

scenario: setup
	$(PY) -m scenarios run $(SCENARIO) --junit $(JUNIT)

soak: setup
	$(PY) -m reliability $(SOAK_ARGS)

# The P4 toolchain needs no venv: these do not run setup.
toolchain:
	@bash scripts/install-p4-toolchain.sh $(TOOLCHAIN_VARS)

toolchain-check:
	@bash scripts/install-p4-toolchain.sh --check $(TOOLCHAIN_VARS)

lint: setup
	$(PY) -m ruff check .
	.venv/bin/lint-imports
	$(PY) scripts/protobuf_stubs.py --check
	$(PY) -m mypy

stubs: setup
	$(PY) scripts/protobuf_stubs.py

clean:
	@if [ -x $(PY) ] && [ -d run ]; then $(PY) -m topo.cleanup || true; fi
	rm -rf build/ dist/ logs/ pcaps/ run/ .pytest_cache/ .ruff_cache/ *.egg-info
	find . -path ./.venv -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean
	rm -rf .venv
