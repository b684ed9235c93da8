# Two entry points for a fresh Debian machine (run as root): `make demo` and `make test`.
# Both install what is missing first: apt packages, the venv (from Debian's python3, with
# system site-packages so Debian's mininet imports inside it) and fabroute itself, with its
# bash/zsh completion and man page under .venv/share (docs/quickstart.md: activation).
PY      := /usr/bin/python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
APT_PKGS := python3-venv opensm ibsim-utils infiniband-diags gcc libc6-dev libopensm-dev libibumad-dev libibmad-dev \
            openvswitch-switch mininet ethtool prometheus chromium
SHELL   := /bin/bash

.PHONY: demo test install clean ovs

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	$(PY) -m venv --system-site-packages $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]'
	$(VENV)/bin/fabroute completion --install $(VENV)
	touch $(STAMP)

demo: $(STAMP) ovs
	$(VENV)/bin/fabroute demo --out out/demo

test: $(STAMP) ovs
	$(VPY) -m pytest -q -n 2 --dist loadgroup tests

# Open vSwitch (userspace datapath); apt does not start services here (nor prometheus: the
# tests start their own, on loopback, by PID).  --no-mlockall: else
# ovs-vswitchd keeps ~600 MB locked.
ovs: $(STAMP)
	@/usr/share/openvswitch/scripts/ovs-ctl status >/dev/null 2>&1 || \
	  /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random --no-monitor --no-mlockall

clean:
	rm -rf $(VENV) out build *.egg-info
