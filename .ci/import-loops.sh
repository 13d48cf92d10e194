#!/usr/bin/env bash
# Import loops between the files of a crate: file A refers to file B and B refers to A.
#
# For each crate's src/, every path that starts with `crate::`, `super::` or `self::` is read
# (use trees included: `use crate::{a::X, b::{self, Y}}`), resolved to the file of the longest
# module prefix that is a file (src/a/b.rs or src/a/b/mod.rs; else the crate root), and counted
# as a reference from the file that wrote it. A pair of files referring to each other fails the
# check, with one reference each way, unless the pair is in .ci/import-loops.allow (lines
# `FILE_A FILE_B`, `#` comments); an allowed pair that is no longer a loop fails too, so that the
# list shrinks when a loop is broken. Comments, strings and char literals are skipped; `super::`
# inside an inline `mod x { }` (tests) is resolved inside the file; macro bodies are read like
# code. Not followed: relative paths (`use child::X` from a parent module, `pub use` in the
# root), paths pasted together by macros, loops through more than two files.
#
# Usage: bash .ci/import-loops.sh [ROOT [ALLOW_FILE]]   (default: the repository, its allow list)
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-.}
allow=${2:-.ci/import-loops.allow}
[ -f "$allow" ] || { echo "import loops: no allow list $allow" >&2; exit 2; }
allow=$(realpath "$allow")
cd "$root"

# Prints one line per reference between two files: FROM TO LINE TEXT (tab-separated).
# shellcheck disable=SC2016
refs_awk='
function isid(c) { return c ~ /^[A-Za-z0-9_]$/ }
function isidstart(c) { return c ~ /^[A-Za-z_]$/ }
function rep(s, n,    r) { r = ""; while (n-- > 0) r = r s; return r }

# Drops comments, string contents and char literals; a string or block comment may span lines
# (state in st: 0 code, 1 string, 2 raw string, 3 block comment).
function strip(l,    out, n, i, c, d, k) {
    out = ""; n = length(l); i = 1
    while (i <= n) {
        c = substr(l, i, 1)
        if (st == 1) {
            if (c == "\\") { i += 2; continue }
            if (c == "\"") { st = 0; out = out c }
            i++; continue
        }
        if (st == 2) {
            if (c == "\"" && substr(l, i + 1, hashes) == hashstr) {
                st = 0; out = out c; i += 1 + hashes; continue
            }
            i++; continue
        }
        d = substr(l, i, 2)
        if (st == 3) {
            if (d == "/*") { bdepth++; i += 2; continue }
            if (d == "*/") { if (--bdepth == 0) st = 0; i += 2; continue }
            i++; continue
        }
        if (d == "//") break
        if (d == "/*") { st = 3; bdepth = 1; i += 2; continue }
        if (c == "\"") { st = 1; out = out c; i++; continue }
        if (c == "r" && (i == 1 || !isid(substr(l, i - 1, 1)) || \
                         (substr(l, i - 1, 1) == "b" && (i == 2 || !isid(substr(l, i - 2, 1)))))) {
            k = i + 1
            while (substr(l, k, 1) == "#") k++
            if (substr(l, k, 1) == "\"") {
                hashes = k - i - 1; hashstr = rep("#", hashes); st = 2
                out = out "\""; i = k + 1; continue
            }
        }
        if (c == "\047") {
            # A char literal (skipped) or a lifetime or label (kept).
            if (substr(l, i + 1, 1) == "\\") {
                k = index(substr(l, i + 3), "\047")
                if (k > 0) { out = out "\047\047"; i += 3 + k; continue }
            } else if (substr(l, i + 2, 1) == "\047") {
                out = out "\047\047"; i += 3; continue
            } else if (substr(l, i + 1, 1) !~ /^[ -~]$/) {
                k = index(substr(l, i + 1, 5), "\047")
                if (k > 1) { out = out "\047\047"; i += 1 + k; continue }
            }
        }
        out = out c; i++
    }
    return out
}

function skipws() { while (P <= N && substr(S, P, 1) ~ /^[ \t\r\n]$/) P++ }
function word(    j) { j = P; while (P <= N && isid(substr(S, P, 1))) P++; return substr(S, j, P - j) }
function join(a, b) { return a == "" ? b : a "::" b }
function parent(p,    seg, n, r, k) {
    n = split(p, seg, "::"); r = ""
    for (k = 1; k < n; k++) r = join(r, seg[k])
    return r
}
function emit(p) { npaths++; paths[npaths] = p }

# Reads a use tree (or a plain path) at P below module path `prefix`; emits the paths it names.
function tree(prefix,    c, w, path, before) {
    skipws(); c = substr(S, P, 1)
    if (c == "{") {
        P++
        while (P <= N) {
            skipws(); c = substr(S, P, 1)
            if (c == "}") { P++; return }
            if (c == ",") { P++; continue }
            before = P; tree(prefix)
            if (P == before) P++
        }
        return
    }
    if (c == "*") { P++; emit(prefix); return }
    if (!isidstart(c)) { emit(prefix); return }
    w = word()
    path = w == "self" ? prefix : w == "super" ? parent(prefix) : join(prefix, w)
    if (substr(S, P, 2) == "::") {
        P += 2; c = substr(S, P, 1)
        if (c == "{" || c == "*" || isidstart(c)) { tree(path); return }
        emit(path); return
    }
    skipws()
    if (substr(S, P, 2) == "as" && !isid(substr(S, P + 2, 1))) { P += 2; skipws(); word() }
    emit(path)
}

# The file of module path p: the longest prefix that is a file of the crate, else the root.
function resolve(p,    seg, n, k, r, j) {
    n = split(p, seg, "::")
    for (k = n; k >= 1; k--) {
        r = src
        for (j = 1; j <= k; j++) r = r "/" seg[j]
        if ((r ".rs") in isfile) return r ".rs"
        if ((r "/mod.rs") in isfile) return r "/mod.rs"
    }
    return rootfile
}

# The module path of a file: src/a/b.rs and src/a/b/mod.rs are a::b; the root is "".
function modpath(f,    r, n, seg, k, m) {
    r = substr(f, length(src) + 2); sub(/\.rs$/, "", r); sub(/(^|\/)mod$/, "", r)
    if (r == "lib" || r == "main") return ""
    n = split(r, seg, "/"); m = ""
    for (k = 1; k <= n; k++) m = join(m, seg[k])
    return m
}

function scan(f,    i, j, c, w, line, depth, mtop, mdepth, base, k, to, text, t, m) {
    N = length(S); i = 1; line = 1; depth = 0; mtop = 0; m = modpath(f)
    while (i <= N) {
        c = substr(S, i, 1)
        if (c == "\n") { line++; i++; continue }
        if (c == "{") { depth++; i++; continue }
        if (c == "}") { if (mtop > 0 && mdepth[mtop] == depth) mtop--; depth--; i++; continue }
        if (!isidstart(c) || (i > 1 && substr(S, i - 1, 1) ~ /^[A-Za-z0-9_$]$/)) { i++; continue }
        j = i; while (j <= N && isid(substr(S, j, 1))) j++
        w = substr(S, i, j - i)
        if (w == "mod") {
            P = j; skipws(); word(); skipws()
            if (substr(S, P, 1) == "{") { mtop++; mdepth[mtop] = depth + 1 }
            i = j; continue
        }
        if ((w == "crate" || w == "super" || w == "self") && substr(S, j, 2) == "::" && \
            (i < 3 || substr(S, i - 2, 2) != "::")) {
            if (w == "crate") base = ""
            else {
                base = m
                for (k = 1; k <= mtop; k++) base = join(base, "<inline>")
                if (w == "super") base = parent(base)
            }
            npaths = 0; P = j + 2; tree(base)
            text = substr(S, i, P - i); gsub(/[ \t\r\n]+/, " ", text)
            if (length(text) > 72) text = substr(text, 1, 69) "..."
            for (k = 1; k <= npaths; k++) {
                to = resolve(paths[k])
                if (to != f) printf "%s\t%s\t%d\t%s\n", f, to, line, text
            }
            t = substr(S, i, P - i); line += gsub(/\n/, "", t)
            i = P; continue
        }
        i = j
    }
}

BEGIN {
    for (k = 1; k < ARGC; k++) isfile[ARGV[k]] = 1
    rootfile = ((src "/lib.rs") in isfile) ? src "/lib.rs" : src "/main.rs"
}
FILENAME != cur { if (cur != "") scan(cur); cur = FILENAME; S = ""; st = 0 }
{ S = S strip($0) "\n" }
END { if (cur != "") scan(cur) }
'

# Reads the allow list, then the references; prints the loops and "FAIL" lines.
# shellcheck disable=SC2016
loops_awk='
function key(a, b) { return a < b ? a " " b : b " " a }
FILENAME == ARGV[1] {
    line = $0; sub(/#.*/, "", line); gsub(/^[ \t]+|[ \t]+$/, "", line)
    if (line == "") next
    n = split(line, f, /[ \t]+/)
    if (n != 2) { printf "FAIL %s:%d: expected two files, got: %s\n", ALLOW, FNR, $0; next }
    allowed[key(f[1], f[2])] = FNR
    next
}
!(($1, $2) in first) { first[$1, $2] = $1 ":" $3 ": " $4; from[++n_edges] = $1; to[n_edges] = $2 }
END {
    for (e = 1; e <= n_edges; e++) {
        a = from[e]; b = to[e]
        if (a > b || !((b, a) in first)) continue
        k = key(a, b); seen[k] = 1
        if (k in allowed) printf "allowed (%s:%d): %s <-> %s\n", ALLOW, allowed[k], a, b
        else printf "FAIL import loop: %s <-> %s\n    %s\n    %s\n", a, b, first[a, b], first[b, a]
    }
    for (k in allowed) if (!(k in seen)) {
        split(k, p, " ")
        printf "FAIL %s:%d: %s <-> %s is no longer a loop: remove the entry\n", ALLOW, allowed[k], p[1], p[2]
    }
}
'

refs=$(mktemp)
trap 'rm -f "$refs"' EXIT
nfiles=0
for src in crates/*/src; do
    [ -d "$src" ] || continue
    mapfile -t files < <(find "$src" -name '*.rs' -not -path "$src/bin/*" | sort)
    [ "${#files[@]}" -gt 0 ] || continue
    nfiles=$((nfiles + ${#files[@]}))
    awk -v src="$src" "$refs_awk" "${files[@]}" >>"$refs"
done
out=$(awk -F'\t' -v ALLOW="${2:-.ci/import-loops.allow}" "$loops_awk" "$allow" "$refs")
[ -z "$out" ] || printf '%s\n' "$out"
nrefs=$(cut -f1,2 "$refs" | sort -u | wc -l)
if grep -q '^FAIL' <<<"$out"; then
    echo "import loops: $(grep -c '^FAIL' <<<"$out") problem(s) in $nfiles files: break each loop by moving what both files use to where it belongs"
    exit 1
fi
echo "import loops: none outside the allow list ($(grep -c '^allowed' <<<"$out" || true) allowed; $nfiles files, $nrefs file-to-file references)"
