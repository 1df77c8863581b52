# pg_kde: `make test` and `make demo` do all the set-up on a fresh Debian 12 machine (root, Python 3.11):
# they install what is missing from Debian (g++, python3-venv/-dev, postgresql-15, its plpython3 and its
# server headers (pg-kde install compiles the extension's C library against them), and
# R with its ks package, the outside oracle of tests/unit/test_ks_oracle.py), make a virtual environment
# in .venv and build pg_kde into it with pip (scikit-build-core + pybind11 + CMake, fetched by pip when
# absent). The SQL tests start their own throwaway local PostgreSQL.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# -P: never import the source tree from the working directory; the installed build is the one under test.
RUN := $(PY) -P

.PHONY: all install test demo bench bench-quick bench-deps bench-aqp bench-budget gpu-check gpu-sanitize clean system-deps python-deps \
	server-stop docker-deps docker-image docker-test citus-test

all: test

python-deps:
	@missing=""; \
	command -v g++ >/dev/null 2>&1 || missing="$$missing g++"; \
	$(PYTHON) -c "import venv, ensurepip" >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	$(PYTHON) -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
	  || missing="$$missing python3-dev"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

system-deps: python-deps
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$$missing postgresql-15"; \
	ls /usr/lib/postgresql/*/lib/plpython3.so >/dev/null 2>&1 || missing="$$missing postgresql-plpython3-15"; \
	ls /usr/include/postgresql/*/server/postgres.h >/dev/null 2>&1 || missing="$$missing postgresql-server-dev-15"; \
	command -v pg_dump >/dev/null 2>&1 || missing="$$missing postgresql-client-15"; \
	command -v Rscript >/dev/null 2>&1 || r_missing="r-base-core"; \
	Rscript -e 'library(ks)' >/dev/null 2>&1 || r_missing="$$r_missing r-cran-ks"; \
	if [ -n "$$missing$$r_missing" ]; then apt-get update -qq || exit 1; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing || exit 1; \
	fi; \
	if [ -n "$$r_missing" ]; then \
	  echo "installing Debian packages:$$r_missing (without recommends: 115 MB, not 646 MB)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$r_missing; \
	fi

$(PY): | python-deps
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

install: system-deps $(PY)
	$(PY) -m pip install -q '.[test,demo]'
	$(VENV)/bin/pg-kde install

test: install
	$(VENV)/bin/pytest

demo: install
	$(RUN) -m pg_kde.demo

bench: install
	$(RUN) benchmarks/bandwidth.py

bench-quick: install
	$(RUN) benchmarks/bandwidth.py --quick

# What the comparisons with other estimators need: the tdigest extension and the bench extra.
bench-deps: install
	@ls /usr/share/postgresql/*/extension/tdigest.control >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15-tdigest)
	$(PY) -m pip install -q '.[bench]'

bench-aqp: bench-deps
	$(RUN) benchmarks/aqp.py

bench-budget: bench-deps
	$(RUN) benchmarks/budget.py

# On a machine with a CUDA device whose Python already has numpy, scipy, CuPy, pytest, pybind11 and
# scikit-build-core (no network needed): build pg_kde into a venv that sees them, then the gpu tests,
# the parity table, LSCV_h's stages with the kernels' tile and block (benchmarks/cuda_lscv_h.py) and the CUDA
# benchmark (last: it exits non-zero when a target is missed). Results: benchmarks/results (and $$OUT when it is set).
GPU_VENV ?= .venv-gpu
# GPU_PYTHON: a Python that already holds those packages in a venv of its own (a venv made over it would not
# see them), used as it is: e.g. make gpu-check GPU_PYTHON=/opt/torch/.venv/bin/python3
GPU_PY = $(if $(GPU_PYTHON),$(GPU_PYTHON),$(GPU_VENV)/bin/python)
gpu-check:
	$(if $(GPU_PYTHON),,$(PYTHON) -m venv --system-site-packages $(GPU_VENV))
	$(GPU_PY) -m pip install -q --no-build-isolation --no-deps .
	$(GPU_PY) -P -c "import pg_kde, sys; r = pg_kde.backends()['cuda']; print(r or 'cuda backend: ready'); sys.exit(r is not None)"
	$(GPU_PY) -P -m pytest -m gpu -q tests/unit
	mkdir -p benchmarks/results
	$(GPU_PY) -P benchmarks/parity.py | tee benchmarks/results/parity_gpu.md
	$(GPU_PY) -P benchmarks/cuda_lscv_h.py --sweep
	$(GPU_PY) -P benchmarks/bandwidth.py --cuda-only --dtype float32
	@if [ -n "$$OUT" ]; then cp benchmarks/results/*.md "$$OUT"/; fi

# After gpu-check, on a machine where compute-sanitizer can attach: the kernel tests (partials strategy,
# small inputs) under memcheck (out-of-bounds and misaligned accesses) and racecheck (shared-memory races).
gpu-sanitize:
	compute-sanitizer --tool memcheck --error-exitcode 1 $(GPU_PY) -P -m pytest -m gpu -q -x \
	  tests/unit/test_kernels.py -k "cuda-partials"
	compute-sanitizer --tool racecheck --error-exitcode 1 $(GPU_PY) -P -m pytest -m gpu -q -x \
	  tests/unit/test_kernels.py -k "cuda-partials and (plugin or kde) and float64"

# Docker (docker/README.md): Debian's docker.io engine, started by tools/docker-engine in a directory of its
# own, and debootstrap for the stand-in of the official postgres image where that cannot be pulled.
docker-deps:
	@missing=""; \
	command -v dockerd >/dev/null 2>&1 || missing="$$missing docker.io"; \
	command -v debootstrap >/dev/null 2>&1 || missing="$$missing debootstrap"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The image of docker/Dockerfile from the working tree, as pg_kde:latest (the engine must run:
# export DOCKER_HOST=$$(tools/docker-engine start)).
docker-image: docker-deps
	tools/docker-build cpu

# The whole SQL suite against that image through testcontainers; needs no PostgreSQL on this machine.
docker-test: docker-deps $(PY)
	$(PY) -m pip install -q '.[docker]'
	PY=$(PY) tools/docker-test $(PYTEST_ARGS)

# A real Citus cluster (a coordinator and two workers on 127.0.0.1, data in CITUS_DIR) built from a Citus
# source tree or git directory (CITUS_SRC, e.g. a clone of github.com/citusdata/citus; tag v13.0.5) by
# CITUS_TOOL, then the tests marked citus against it; the cluster is stopped afterwards. Not part of make test.
CITUS_TOOL ?= ../shared/tools/citus-cluster
CITUS_DIR ?= /tmp/pg_kde-citus
citus-test: install
	@test -n "$(CITUS_SRC)" || { echo "set CITUS_SRC to a Citus source tree or git directory"; exit 2; }
	$(CITUS_TOOL) build $(CITUS_SRC)
	PG_ENV="PYTHONPATH=$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
	  $(CITUS_TOOL) start $(CITUS_DIR)
	PG_KDE_CITUS_DSN="host=127.0.0.1 port=$${PORT:-56001} user=postgres dbname=postgres" \
	  $(VENV)/bin/pytest -m citus tests/sql/test_citus.py; rc=$$?; $(CITUS_TOOL) stop $(CITUS_DIR); exit $$rc

server-stop:
	-$(VENV)/bin/pg-kde server stop

clean: server-stop
	rm -rf $(VENV) $(GPU_VENV) build .pytest_cache .pg_kde
