#!/usr/bin/env bash
# One-command set-up for hybridbed on Debian/Ubuntu, as root. Idempotent: a second run only checks.
#   - Debian packages: Mininet, Open vSwitch, cgroup tools, ethtool, ping, iproute2, OpenSSH and socat
#     (a multi-server run reaches its further servers over ssh, and their workers reach the scheduler through
#     socat relays; the two-server test starts an sshd of its own)
#   - .venv in this checkout over /usr/bin/python3 with system site packages (Debian's mininet lives there)
#   - hybridbed itself (editable) with its Python dependencies and test tools, and its numba kernels compiled
set -euo pipefail
cd "$(dirname "$0")"

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (Mininet and Open vSwitch need it)" >&2
  exit 1
fi

apt_packages=(mininet openvswitch-switch cgroup-tools ethtool iputils-ping iproute2 procps python3-venv python3-dev
  openssh-client openssh-server socat tcpdump)
missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing Debian packages: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup.sh: creating .venv over /usr/bin/python3 (with system site packages for mininet)"
  /usr/bin/python3 -m venv --system-site-packages .venv
fi

# Reinstall only when the dependency list changed since the last successful install.
stamp=.venv/.hybridbed-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup.sh: installing hybridbed and its Python dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  echo "$want" > "$stamp"
fi

.venv/bin/python -c "import mininet.net, os_ken, networkx, hybridbed" \
  || { echo "setup.sh: the environment does not import; see the errors above" >&2; exit 1; }

# The simulator's and planners' numba kernels compile on first use and are cached beside their sources
# (__pycache__). Compiling them cold takes some 45 s, which the first simulated run would otherwise pay (each
# setup of a first `hybridbed compare --backend simulation` at once): compile them now, by simulating the
# quickstart scenario under the four setups, again only when a kernel's source or the dependencies changed.
stamp=.venv/.hybridbed-kernels
want=$( (grep -rl --include='*.py' 'numba.njit' hybridbed | sort | xargs cat; cat pyproject.toml) | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup.sh: compiling the simulator's kernels (once per checkout, under a minute)"
  warm=$(mktemp -d)
  trap 'rm -rf "$warm"' EXIT
  .venv/bin/hybridbed compare scenarios/quickstart.yaml --backend simulation --workers 1 --out "$warm/compare" \
    > "$warm/log" 2>&1 || { cat "$warm/log" >&2; echo "setup.sh: the simulator does not run; see above" >&2; exit 1; }
  # and the rate computation over every class, which the relaxed one steps aside to where merging gains little
  .venv/bin/python -c 'import numpy as np
from hybridbed.simulator.fairshare import link_loads, max_min_rates, solver_arrays
paths, capacities, caps, weights = solver_arrays(np.array([[0, 2], [1, 2]]), np.array([1.0, 2.0, np.inf]), np.full(2, np.inf), None)
link_loads(paths, weights, max_min_rates(paths, capacities, caps, weights), capacities.size)'
  echo "$want" > "$stamp"
fi
echo "setup.sh: ready (.venv/bin/hybridbed)"
