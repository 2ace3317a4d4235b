#!/usr/bin/env bash
# Fails if transport code leaks into transport-free libraries (docs/design.md,
# "Layers and the dependency rule"): no gRPC or generated proto headers in
# common/, model/, kernels/, or the services' engine, index and placement.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
dirs=(common model kernels)
for d in services/*/engine services/*/index services/*/placement services/*/frontend; do [[ -d $d ]] && dirs+=("$d"); done
leaks=$(grep -rlE '#include [<"](grpcpp/|grpc/|.*\.pb\.h|.*\.grpc\.pb\.h)' "${dirs[@]}" 2>/dev/null)
if [[ -n $leaks ]]; then
  echo "gRPC or generated proto headers in transport-free code:"
  echo "$leaks"
  exit 1
fi
echo "dependency direction: no transport headers in ${dirs[*]}"
