# Flattens the plain subset of YAML that cloud-init's NoCloud files use (meta-data,
# network-config v1/v2) into lines "PATH<TAB>VALUE", as json.awk does for JSON: block maps
# ("key: value", "key:" and an indented block), block sequences ("- item", "- key: value"),
# flow sequences of scalars ("[a, b]"), quoted scalars, comments and "---". Anchors, tags,
# multi-line scalars and flow maps are not understood (their text is kept as the value).
# Runs under busybox awk.
function join(path, key) { return path == "" ? key : path "." key }
function unquote(s) {
  if (s ~ /^".*"$/ || s ~ /^'.*'$/) return substr(s, 2, length(s) - 2)
  return s
}
function strip_comment(s,   i, c, q) {
  q = ""
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (q != "") { if (c == q) q = ""; continue }
    if (c == "\"" || c == "'") q = c
    else if (c == "#" && (i == 1 || substr(s, i - 1, 1) ~ /[ \t]/)) return substr(s, 1, i - 1)
  }
  return s
}
function scalar(path, v,   items, k, m) {
  sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v)
  if (v ~ /^\[.*\]$/) {
    v = substr(v, 2, length(v) - 2)
    if (v ~ /^[ \t]*$/) return
    m = split(v, items, ",")
    for (k = 1; k <= m; k++) {
      sub(/^[ \t]+/, "", items[k]); sub(/[ \t]+$/, "", items[k])
      print join(path, k - 1) "\t" unquote(items[k])
    }
    return
  }
  print path "\t" unquote(v)
}
# A "key: value" or "key:" entry at column col in the map at depth d.
function entry(col, s,   key, rest, i) {
  i = index(s, ":")
  key = unquote(substr(s, 1, i - 1))
  rest = substr(s, i + 1)
  sub(/^[ \t]+/, "", rest)
  if (rest == "") { d++; ind[d] = -1; keycol[d] = col; pth[d] = join(pth[d - 1], key); isseq[d] = 0; cnt[d] = 0 }
  else scalar(join(pth[d], key), rest)
}
BEGIN { d = 0; ind[0] = -1; keycol[0] = -2; pth[0] = "" }
{
  line = $0
  sub(/\r$/, "", line)
  if (line ~ /^(---|\.\.\.)[ \t]*$/ || line ~ /^%/) next
  line = strip_comment(line)
  if (line ~ /^[ \t]*$/) next
  match(line, /^ */)
  col = RLENGTH
  s = substr(line, col + 1)
  dash = (s ~ /^-( |$)/)
  # A block opened by "key:" takes the indentation of its first line: deeper than the key,
  # or a sequence at the key's own column.
  if (ind[d] == -1) {
    if (col > keycol[d] || (col == keycol[d] && dash)) { ind[d] = col; isseq[d] = dash }
    else d--
  }
  while (d > 0 && (col < ind[d] || (col == ind[d] && isseq[d] && !dash) || (col == ind[d] && !isseq[d] && dash && ind[d - 1] == col))) d--
  if (dash) {
    if (!isseq[d]) next
    item = join(pth[d], cnt[d]++)
    s = substr(s, 2); sub(/^ +/, "", s)
    if (s == "") { d++; ind[d] = -1; keycol[d] = col; pth[d] = item; isseq[d] = 0; cnt[d] = 0; next }
    if (s ~ /^[^ "'\[][^:]*:( |$)/ || s ~ /^"[^"]*":( |$)/) {
      d++; ind[d] = col + 2 + (length(substr(line, col + 2)) - length(s) - 1); keycol[d] = ind[d]; pth[d] = item; isseq[d] = 0; cnt[d] = 0
      entry(ind[d], s)
      next
    }
    scalar(item, s)
    next
  }
  if (s ~ /^[^ "'\[][^:]*:( |$)/ || s ~ /^"[^"]*":( |$)/ || s ~ /^'[^']*':( |$)/) entry(col, s)
}
