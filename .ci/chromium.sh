# shellcheck shell=bash
# Sourced by .ci/run: Debian's Chromium for the chat page's browser tests
# (tests/serve/test_page.py drives it with Playwright; no browser is downloaded by Playwright).
# Installed with apt-get only when /usr/bin/chromium is missing.

install_chromium() {
  if [ -x /usr/bin/chromium ]; then
    echo "+ using /usr/bin/chromium"
    return 0
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
  echo "+ installing Chromium (apt-get)"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium </dev/null >/dev/null
  [ -x /usr/bin/chromium ] || { echo "/usr/bin/chromium not found after install" >&2; return 1; }
}
