#!/usr/bin/env bash
# Second-environment determinism check (docs/REPRODUCIBILITY.md): recompute the golden corruption hashes of both suites
# under a different NumPy major and OpenCV minor, in a throwaway venv, and compare them with tests/golden/hashes.json
# (aegis-v1) and tests/golden/hashes_v2.json (aegis-v2).
#
#   scripts/check_second_env.sh                     # numpy 1.26.4 + opencv-python 4.10.0.84
#   NUMPY_VERSION=1.26.4 OPENCV_VERSION=4.11.0.86 scripts/check_second_env.sh
#
# Exits 0 when every hash matches in each run (default; cv2.setUseOptimized(False); OPENCV_CPU_DISABLE of the
# CPU's AVX features; NumPy's AVX2/AVX-512 dispatch disabled), 1 on any difference, 2 when the environment
# cannot be built. Needs python3.11 (or $PYTHON) and a package index that has the two wheels;
# touches nothing outside $WORK (default: a fresh /tmp/aegis-env2.XXXX, removed at the end unless KEEP=1).
# make test (and so CI) runs it after the suite; `make matrix` runs it alone. It installs packages into $WORK only.
set -euo pipefail

REPO="${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
PYTHON="${PYTHON:-python3.11}"
NUMPY_VERSION="${NUMPY_VERSION:-1.26.4}"
OPENCV_VERSION="${OPENCV_VERSION:-4.10.0.84}"
WORK="${WORK:-$(mktemp -d /tmp/aegis-env2.XXXX)}"
GOLDEN="${GOLDEN:-$REPO/tests/golden/hashes.json}"
GOLDEN_V2="${GOLDEN_V2:-$REPO/tests/golden/hashes_v2.json}"

cleanup() { if [ "${KEEP:-0}" != "1" ]; then rm -rf "$WORK"; fi; }
trap cleanup EXIT

die_env() { echo "check_second_env: cannot build the environment: $*" >&2; exit 2; }

[ -f "$GOLDEN" ] || die_env "no golden hashes at $GOLDEN"
command -v "$PYTHON" >/dev/null || die_env "$PYTHON not found (set PYTHON=...)"

# A private copy of the sources, so the editable install writes its metadata there, not into the checkout.
SRC="$WORK/src"
mkdir -p "$SRC/tests"
for item in pyproject.toml setup.py README.md aegis_data cli aegis_eval configs; do
    [ -e "$REPO/$item" ] && cp -R "$REPO/$item" "$SRC/"
done
cp -R "$REPO/tests/golden" "$SRC/tests/"
cp "$REPO/tests/__init__.py" "$SRC/tests/"  # tests/golden/*.py import tests.golden.*
find "$SRC" -name __pycache__ -prune -exec rm -rf {} +

echo "== building venv in $WORK/venv ($PYTHON, numpy==$NUMPY_VERSION, opencv-python==$OPENCV_VERSION)"
"$PYTHON" -m venv "$WORK/venv" || die_env "venv creation failed"
PY="$WORK/venv/bin/python"
"$PY" -m pip install -q "numpy==$NUMPY_VERSION" "opencv-python==$OPENCV_VERSION" pyyaml \
    || die_env "pip could not install numpy==$NUMPY_VERSION opencv-python==$OPENCV_VERSION pyyaml"
# Editable so that configs/suites/ is found beside the package, as in a checkout.
"$PY" -m pip install -q --no-deps --no-build-isolation -e "$SRC" 2>/dev/null \
    || "$PY" -m pip install -q --no-deps -e "$SRC" || die_env "installing the project failed"

cd "$SRC"
set +e
"$PY" - "$GOLDEN" "$GOLDEN_V2" <<'EOF'
import json
import os
import platform
import subprocess
import sys

import cv2
import numpy as np

import hashlib

suites = [("aegis-v1", "tests/golden/frames.py", sys.argv[1]), ("aegis-v2", "tests/golden/v2.py", sys.argv[2])]
print(f"python {platform.python_version()}  numpy {np.__version__}  opencv {cv2.__version__}  "
      f"machine {platform.machine()}  golden files " + ", ".join(
          f"{name} {hashlib.sha256(open(path, 'rb').read()).hexdigest()[:12]}" for name, _, path in suites))
umath = getattr(np, "_core", None) or np.core
umath = umath._multiarray_umath
# NumPy's runtime-dispatched SIMD targets from AVX2 up that this CPU has: switched off in the third run.
simd = [f for f in umath.__cpu_dispatch__
        if (f.startswith("AVX512") or f in ("AVX2", "FMA3")) and umath.__cpu_features__.get(f)]
runs = [("default", [], {}), ("cv2.setUseOptimized(False)", ["--cv2-noopt"], {})]
# OpenCV's CPU dispatch (names for OPENCV_CPU_DISABLE, ids for cv2.checkHardwareSupport).
cv_feats = [n for n, fid in {"AVX512-SKX": 256, "AVX2": 11, "FMA3": 12, "AVX": 10, "FP16": 9}.items()
            if cv2.checkHardwareSupport(fid)]
if cv_feats:
    runs.append((f"OPENCV_CPU_DISABLE={','.join(cv_feats)}", [], {"OPENCV_CPU_DISABLE": ",".join(cv_feats)}))
if simd:
    runs.append((f"NPY_DISABLE_CPU_FEATURES={' '.join(simd)}", [], {"NPY_DISABLE_CPU_FEATURES": " ".join(simd)}))
ok = True
for (suite, script, path), (label, extra, env) in ((s, r) for s in suites for r in runs):
    golden = json.load(open(path))["hashes"]
    label = f"{suite} {label}"
    proc = subprocess.run([sys.executable, script, *extra], capture_output=True, text=True,
                          env={**os.environ, **env})
    if proc.returncode != 0:
        print(f"[{label}] computing the hashes failed:\n{proc.stderr.strip()}")
        sys.exit(2)
    doc = json.loads(proc.stdout)
    # frames.py prints {"hashes": {...}, "runtime": {...}} (older versions: the bare hash mapping).
    got = doc["hashes"] if isinstance(doc.get("hashes"), dict) else doc
    missing = sorted(set(golden) - set(got))
    extra_keys = sorted(set(got) - set(golden))
    differ = sorted(k for k in set(golden) & set(got) if golden[k] != got[k])
    same = len(golden) - len(missing) - len(differ)
    rt = doc.get("runtime", {}) if "hashes" in doc else {}
    proof = (f" (ran with cv2 optimized={rt.get('cv2_optimized')}, cv2 AVX2={rt.get('cv2_avx2')}, "
             f"{len(rt.get('numpy_enabled', []))} numpy CPU features enabled)" if rt else "")
    print(f"[{label}] {same}/{len(golden)} golden hashes match{proof}")
    for k in differ:
        print(f"  DIFFERS  {k}")
    for k in missing:
        print(f"  MISSING  {k}")
    for k in extra_keys:
        print(f"  EXTRA    {k}")
    ok = ok and not differ and not missing
sys.exit(0 if ok else 1)
EOF
status=$?
if [ $status -eq 0 ]; then echo "== MATCH: numpy $NUMPY_VERSION / opencv-python $OPENCV_VERSION reproduce every golden hash of both suites"; fi
exit $status
