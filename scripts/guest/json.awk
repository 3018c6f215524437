# Flattens one JSON document (stdin) into lines "PATH<TAB>VALUE": object keys and array
# indexes joined by '.', e.g. networks.0.ip_address<TAB>10.0.2.20. Strings are unescaped
# (\" \\ \/ \b \f \n \r \t; \uXXXX is kept as written); numbers, true, false and null are
# printed as written; empty objects and arrays print nothing. Runs under busybox awk.
BEGIN { RS = "\001" }
{ text = text $0 }
END {
  n = length(text); pos = 1
  value("")
  skip()
  if (pos <= n) { print "json.awk: trailing data at " pos > "/dev/stderr"; exit 1 }
}
function skip() {
  while (pos <= n && index(" \t\r\n", substr(text, pos, 1)) > 0) pos++
}
function fail(what) {
  print "json.awk: " what " at " pos > "/dev/stderr"
  exit 1
}
function join(path, key) { return path == "" ? key : path "." key }
function value(path,   c, lit) {
  skip()
  c = substr(text, pos, 1)
  if (c == "{") obj(path)
  else if (c == "[") arr(path)
  else if (c == "\"") print path "\t" str()
  else {
    lit = ""
    while (pos <= n && index(",}] \t\r\n", substr(text, pos, 1)) == 0) { lit = lit substr(text, pos, 1); pos++ }
    if (lit == "") fail("a value expected")
    print path "\t" lit
  }
}
function obj(path,   key, c) {
  pos++
  skip()
  if (substr(text, pos, 1) == "}") { pos++; return }
  while (1) {
    skip()
    if (substr(text, pos, 1) != "\"") fail("a key expected")
    key = str()
    skip()
    if (substr(text, pos, 1) != ":") fail("':' expected")
    pos++
    value(join(path, key))
    skip()
    c = substr(text, pos, 1); pos++
    if (c == "}") return
    if (c != ",") fail("',' or '}' expected")
  }
}
function arr(path,   i, c) {
  pos++
  skip()
  if (substr(text, pos, 1) == "]") { pos++; return }
  for (i = 0; ; i++) {
    value(join(path, i))
    skip()
    c = substr(text, pos, 1); pos++
    if (c == "]") return
    if (c != ",") fail("',' or ']' expected")
  }
}
function str(   s, c, e) {
  pos++
  s = ""
  while (pos <= n) {
    c = substr(text, pos, 1)
    if (c == "\"") { pos++; return s }
    if (c == "\\") {
      pos++
      e = substr(text, pos, 1)
      if (e == "n") s = s "\n"
      else if (e == "t") s = s "\t"
      else if (e == "r") s = s "\r"
      else if (e == "b") s = s "\b"
      else if (e == "f") s = s "\f"
      else if (e == "u") s = s "\\u"
      else s = s e
    } else s = s c
    pos++
  }
  fail("unterminated string")
}
