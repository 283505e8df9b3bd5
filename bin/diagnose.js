'use strict'
// Read-only diagnostics behind `pi-native matrix` and `pi-native recover`: they look at the
// files the library reads and say, in plain words, why something is not seen. They never decide
// what the library returns (the CLI reports the library's own answers next to them).
const fs = require('node:fs')
const path = require('node:path')
const { explainEntry } = require('./explain-entry.js')
const { completeLines, parseEntries, migrationThrows, lastAnswer } = require('../js/session-parse.js')

// proper-lockfile's staleness floor as the store uses it (rule B17): a held lock is refreshed
// every second, so a lock directory untouched for longer than this belongs to nobody.
const LOCK_STALE_MS = 2000
// sweepOrphanTempFiles' default minimum age: an atomic write lives for milliseconds.
const TEMP_OLD_MS = 300000
// The store's temp-file name (rule B19): <entry>.json.<pid>.<uuid v4>.tmp
const TEMP_RE = /^(.+\.json)\.(\d+)\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$/
// A native lock's private folder: `<entry>.json.lock.<uuid>` (lowercase, as the writers print it).
const PRIVATE_LOCK_RE = /^.*\.json\.lock\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** 'alive' | 'dead' | 'unknown' for a writer pid, judged the way the store's sweep judges it. */
function writerState(pid) {
  try {
    process.kill(pid, 0)
    return 'alive'
  } catch (err) {
    return err.code === 'ESRCH' ? 'dead' : 'unknown'
  }
}

// The most of an entry file the CLI reads: the store's own bound (issue 42), over which it skips
// a file as it skips an unparsable one; the CLI says so instead of reading a 600 MB file, a
// /dev/zero link or /proc/self/pagemap to its end.
const { ENTRY_MAX_BYTES: ENTRY_READ_LIMIT } = require('../lib/contract/options.js')

/** What kind of file a stat names, in plain words ('a FIFO (named pipe)', …). */
function fileType(st) {
  if (st.isFIFO()) return 'a FIFO (named pipe)'
  if (st.isCharacterDevice()) return 'a character device'
  if (st.isBlockDevice()) return 'a block device'
  if (st.isSocket()) return 'a socket'
  if (st.isDirectory()) return 'a directory'
  return 'not a regular file'
}

/**
 * Read `file` as the CLI may: opened without blocking (a FIFO or a device answers at once), its
 * type and size taken from the open descriptor (not from a stat before the open, which a rename
 * can outrun), only a regular file read, and at most `limit` bytes of it (a file whose size says
 * 0, such as one under /proc, is read up to the limit and no further).
 * Returns { bytes } | { notRegular: type } | { tooLarge: bytes seen } | { error, opened? }
 * (`opened`: the file opened, then failed to read, as /proc/self/pagemap does).
 */
function readBounded(file, limit) {
  let fd
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0))
  } catch (error) {
    return { error }
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) return { notRegular: fileType(st) }
    if (st.size > limit) return { tooLarge: st.size }
    // One byte more than the size says: a file that grew, or one under /proc whose size says 0,
    // shows as longer; the buffer grows up to limit + 1, where the file is too large.
    let buf = Buffer.allocUnsafe(Math.min(limit + 1, Math.max(st.size + 1, 4096)))
    let got = 0
    for (;;) {
      if (got === buf.length) {
        if (got > limit) return { tooLarge: got }
        const bigger = Buffer.allocUnsafe(Math.min(limit + 1, buf.length * 2))
        buf.copy(bigger, 0, 0, got)
        buf = bigger
      }
      const k = fs.readSync(fd, buf, got, buf.length - got, null)
      if (k === 0) return { bytes: buf.subarray(0, got) }
      got += k
    }
  } catch (error) {
    return { error, opened: true }
  } finally {
    fs.closeSync(fd)
  }
}

const errText = (err) => (err && err.code ? `${err.code}: ${String(err.message).replace(/^\w+: /, '')}` : String(err))

/**
 * Judge one `*.json` file: { kind: 'valid', value } or { kind, reason, rule?, field? } where kind
 * is unreadable | not-a-file | too-large | bom | not-json | schema | name-mismatch. Returns null when the file vanished
 * between listing and reading (a concurrent remove is not a problem).
 */
function judgeEntryFile(dir, name) {
  const file = path.join(dir, name)
  const got = readBounded(file, ENTRY_READ_LIMIT)
  if (got.error) {
    const err = got.error
    if (err.code === 'ENOENT') {
      try {
        fs.lstatSync(file)
      } catch {
        return null
      }
      return { kind: 'unreadable', reason: `cannot be read (${errText(err)}; a symbolic link to nothing)` }
    }
    if (err.code === 'EISDIR') return { kind: 'unreadable', reason: 'is a directory, not an entry file' }
    return { kind: 'unreadable', reason: `cannot be read (${errText(err)})`, ...(got.opened ? { unsafe: true } : {}) }
  }
  if (got.notRegular === 'a directory') return { kind: 'unreadable', reason: 'is a directory, not an entry file' }
  if (got.notRegular) return { kind: 'not-a-file', unsafe: true, reason: `is ${got.notRegular}, not a regular file: the store skips it` }
  if (got.tooLarge !== undefined) {
    return { kind: 'too-large', unsafe: true, reason: `holds more than ${ENTRY_READ_LIMIT / 1024 / 1024} MiB (an entry is a few KB), so it is not read here: the store skips it` }
  }
  const { bytes } = got
  const text = bytes.toString('utf8')
  if (text.startsWith('\ufeff')) {
    let rest = 'the rest is not a valid entry either'
    try {
      if (explainEntry(JSON.parse(text.slice(1))) === null) rest = 'the rest is a valid entry: save it again without the BOM'
    } catch {}
    return { kind: 'bom', reason: `starts with a byte-order mark (BOM), which JSON does not allow, so the store ignores the file; ${rest}` }
  }
  let value
  try {
    value = JSON.parse(text)
  } catch (err) {
    const what = text.trim() === '' ? 'is empty' : `is not valid JSON (${err.message})`
    return { kind: 'not-json', reason: `${what}, so the store ignores it` }
  }
  const why = explainEntry(value)
  if (why) {
    return {
      kind: 'schema',
      rule: why.rule,
      field: why.field,
      reason: `breaks schema rule ${why.rule}: ${why.message}; the store ignores it`,
    }
  }
  if (name !== `${value.entryId}.json`) {
    return {
      kind: 'name-mismatch',
      value,
      entryId: value.entryId,
      reason: `holds entry ${JSON.stringify(value.entryId)} but is not named ${JSON.stringify(`${value.entryId}.json`)}: listEntries shows it, readEntry/writeEntry for that id use the other file`,
    }
  }
  return { kind: 'valid', value }
}

/**
 * Everything in a process-matrix directory that is not a valid entry.
 * Returns { state, reason?, problems, inFlight, validFiles, entries, unsafe } where state is
 * ok | missing | not-a-directory | unreadable; each problem is
 * { file, kind, reason, rule?, field?, ageMs? }; `entries` are the valid entries read here (a
 * misnamed one included), in file-name order, as listEntries answers them; `unsafe` names an
 * entry file a reader that does not bound its reads could hang or run out of memory on (a FIFO,
 * a device, a file over the read bound, a file that opened but could not be read).
 */
function diagnoseMatrixDir(dir, now = Date.now()) {
  const out = { state: 'ok', problems: [], inFlight: [], validFiles: 0, entries: [], unsafe: null }
  let st
  try {
    st = fs.statSync(dir)
  } catch (err) {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') {
      out.state = 'missing'
      out.reason = `there is no process-matrix directory at ${dir}: no host has registered an entry under this agentDir yet, or the agentDir is not the one the hosts use`
      return out
    }
    out.state = 'unreadable'
    out.reason = `cannot look at ${dir} (${errText(err)})`
    return out
  }
  if (!st.isDirectory()) {
    out.state = 'not-a-directory'
    out.reason = `${dir} exists but is not a directory, so the store can neither read nor write entries there`
    return out
  }
  let dirents
  try {
    dirents = fs.readdirSync(dir, { withFileTypes: true })
  } catch (err) {
    out.state = 'unreadable'
    out.reason = `cannot list ${dir} (${errText(err)})`
    return out
  }
  dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const problem = (p) => out.problems.push(p)
  for (const d of dirents) {
    const name = d.name
    const file = path.join(dir, name)
    if (d.isDirectory() && name.endsWith('.lock')) {
      let ageMs
      try {
        ageMs = now - fs.statSync(file).mtimeMs
      } catch {
        continue // released while we looked
      }
      if (ageMs > LOCK_STALE_MS) {
        problem({ file: name, kind: 'stale-lock', ageMs, reason: `stale lock: not refreshed for ${formatAge(ageMs)} (a live holder refreshes it every second); its holder is gone and the next writer will take it over` })
      } else {
        out.inFlight.push({ file: name, kind: 'lock', ageMs, reason: 'lock held by a writer right now' })
      }
      continue
    }
    if (d.isDirectory() && PRIVATE_LOCK_RE.test(name)) {
      // A native lock being prepared under its private name (network folders), or one a crash
      // left there (COMPATIBILITY.md, "Private names and one probe").
      let ageMs
      try {
        ageMs = now - fs.statSync(file).mtimeMs
      } catch {
        continue
      }
      if (ageMs >= TEMP_OLD_MS) {
        problem({ file: name, kind: 'orphaned-temp', ageMs, reason: `a lock folder ${formatAge(ageMs)} old that a native process was preparing on this network folder and left (it crashed); sweepOrphanTempFiles removes it` })
      } else {
        out.inFlight.push({ file: name, kind: 'lock', ageMs, reason: 'a lock being prepared by a native process (network folder)' })
      }
      continue
    }
    const temp = TEMP_RE.exec(name)
    if (temp) {
      let ageMs
      try {
        ageMs = now - fs.statSync(file).mtimeMs
      } catch {
        continue
      }
      const pid = Number(temp[2])
      const writer = writerState(pid)
      if (writer === 'dead') {
        problem({ file: name, kind: 'orphaned-temp', ageMs, pid, reason: `orphaned temporary file (${formatAge(ageMs)} old) of an interrupted write to ${temp[1]}: writer pid ${pid} is gone; sweepOrphanTempFiles removes it once it is 5 minutes old` })
      } else if (ageMs >= TEMP_OLD_MS) {
        problem({ file: name, kind: 'orphaned-temp', ageMs, pid, reason: `temporary file ${formatAge(ageMs)} old; writer pid ${pid} still exists (${writer === 'alive' ? 'possibly a reused pid' : 'not ours to probe'}), a write takes milliseconds` })
      } else {
        out.inFlight.push({ file: name, kind: 'temp', ageMs, pid, reason: `write in progress by pid ${pid}` })
      }
      continue
    }
    if (name.endsWith('.json')) {
      const j = judgeEntryFile(dir, name)
      if (j === null) continue
      if (j.kind === 'valid') {
        out.validFiles++
        out.entries.push(j.value)
        continue
      }
      if (j.kind === 'name-mismatch') out.entries.push(j.value)
      if (j.unsafe) out.unsafe ??= name
      const { kind, reason, rule, field, entryId } = j
      problem({ file: name, kind, reason, ...(rule ? { rule, field } : {}), ...(entryId !== undefined ? { entryId } : {}) })
      continue
    }
    const what = d.isDirectory() ? 'a directory' : d.isSymbolicLink() ? 'a symbolic link' : 'a file'
    problem({ file: name, kind: 'stray', reason: `${what} the store does not use (entries are <role>-<sessionId>.json); it is ignored` })
  }
  return out
}

function formatAge(ms) {
  if (!Number.isFinite(ms)) return '-'
  const s = Math.max(0, Math.round(ms / 1000))
  if (s < 120) return `${s}s`
  if (s < 7200) return `${Math.round(s / 60)}m`
  if (s < 172800) return `${Math.round(s / 3600)}h`
  return `${Math.round(s / 86400)}d`
}

// ---- recovery candidates (rules A13–A17) ----------------------------------------------------------

/** Why the library found nothing in one candidate file (plain words). */
function explainCandidate(file, maxFileBytes) {
  const got = readBounded(file, maxFileBytes)
  if (got.error) return { reason: 'unreadable', detail: `cannot be read (${errText(got.error)})` }
  if (got.notRegular) return { reason: 'unreadable', detail: `is ${got.notRegular}, not a regular file` }
  if (got.tooLarge !== undefined) {
    return { reason: 'size-cap', detail: `is ${got.tooLarge} bytes, over the ${maxFileBytes}-byte cap (options.maxFileBytes)`, size: got.tooLarge }
  }
  const size = got.bytes.length
  if (size === 0) return { reason: 'empty', detail: 'is empty', size: 0 }
  const text = got.bytes.toString('utf8')
  // A line without its newline may still be being written: the library ignores it.
  const entries = parseEntries(completeLines(text))
  if (migrationThrows(entries)) {
    return { reason: 'unmigratable', detail: 'is an old-format session the SDK cannot migrate (it holds a non-object line), so it is skipped', size }
  }
  if (lastAnswer(entries) === null) {
    return { reason: 'no-assistant-turn', detail: 'has no complete assistant turn (an assistant message with text and a final stop reason)', size }
  }
  return { reason: 'changed', detail: 'has a complete assistant turn now: it changed while recovery ran, or the deadline passed', size }
}

/**
 * The candidates recovery looks at in `dir`, in its order (files named *_<sessionId>.jsonl
 * first, then newest first), each with `lookedAt` (within maxFiles) and a reason when skipped.
 */
function explainCandidates(dir, names, sessionId, limits) {
  const suffix = typeof sessionId === 'string' && sessionId ? `_${sessionId}.jsonl` : null
  const listed = names.map((name) => {
    const c = { name, matchesSessionId: suffix !== null && name.endsWith(suffix) }
    try {
      c.mtime = fs.statSync(path.join(dir, name)).mtimeMs
    } catch (err) {
      c.statError = err
    }
    return c
  })
  // Recovery drops files it cannot stat before choosing; they take no place among maxFiles.
  const kept = listed.filter((c) => !c.statError)
  const byNewest = (a, b) => b.mtime - a.mtime
  const ordered = [...kept.filter((c) => c.matchesSessionId).sort(byNewest), ...kept.filter((c) => !c.matchesSessionId).sort(byNewest)]
  const explained = ordered.map((c, i) => {
    const file = path.join(dir, c.name)
    if (i >= limits.maxFiles) {
      return { file, matchesSessionId: c.matchesSessionId, lookedAt: false, reason: 'not-looked-at', detail: `not looked at: only the ${limits.maxFiles} first candidates are (options.maxFiles)` }
    }
    return { file, matchesSessionId: c.matchesSessionId, lookedAt: true, ...explainCandidate(file, limits.maxFileBytes) }
  })
  for (const c of listed.filter((x) => x.statError)) {
    explained.push({ file: path.join(dir, c.name), matchesSessionId: c.matchesSessionId, lookedAt: false, reason: 'unreadable', detail: `cannot be read (${errText(c.statError)}), so recovery skips it` })
  }
  return explained
}

/**
 * The session id a session file holds: its header's `id` (the first line, read bounded and
 * without blocking), else the part of its name after the first `_` (`<time>_<id>.jsonl`), else
 * its name without `.jsonl`.
 */
function sessionIdOfFile(file) {
  let fd
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0))
    if (fs.fstatSync(fd).isFile()) {
      const buf = Buffer.alloc(64 * 1024)
      const got = fs.readSync(fd, buf, 0, buf.length, 0)
      const first = buf.subarray(0, got).toString('utf8').split('\n')[0]
      const header = JSON.parse(first)
      if (header && header.type === 'session' && typeof header.id === 'string' && header.id !== '') return header.id
    }
  } catch {
    // no readable header: the name says it
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
  const name = path.basename(file).replace(/\.jsonl$/, '')
  const at = name.indexOf('_')
  return at >= 0 ? name.slice(at + 1) : name
}

module.exports = { sessionIdOfFile,  diagnoseMatrixDir, judgeEntryFile, explainCandidates, formatAge, readBounded, LOCK_STALE_MS, ENTRY_READ_LIMIT }
