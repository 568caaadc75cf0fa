# The compiler cache of scripts/build.sh and scripts/sanitize.sh (sourced):
# outside the checkout, so that it outlives it, and hitting across checkouts
# at other paths (every CI run is a fresh clone): paths under the checkout
# are hashed relative to it, and the build directory's path is not hashed
# (CCACHE_NOHASHDIR; debug info keeps the first compile's directory).
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/strata-ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}" CCACHE_NOHASHDIR=1
