'use strict'
// Read-only diagnostics behind `pi-native matrix` and `pi-native recover`: they look at the
// files the library reads and say, in plain words, why something is not seen. They never decide
// what the library returns (the CLI reports the library's own answers next to them).
const fs = require('node:fs')
const path = require('node:path')
const { explainEntry } = require('./explain-entry.js')
const { completeLines, parseEntries, migrationThrows, lastAnswer } = require('../js/session-parse.js')

// proper-lockfile's staleness floor as the store uses it (SPEC B17): a held lock is refreshed
// every second, so a lock directory untouched for longer than this belongs to nobody.
const LOCK_STALE_MS = 2000
// sweepOrphanTempFiles' default minimum age: an atomic write lives for milliseconds.
const TEMP_OLD_MS = 300000
// The store's temp-file name (SPEC B19): <entry>.json.<pid>.<uuid v4>.tmp
const TEMP_RE = /^(.+\.json)\.(\d+)\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$/

/** 'alive' | 'dead' | 'unknown' for a writer pid, judged the way the store's sweep judges it. */
function writerState(pid) {
  try {
    process.kill(pid, 0)
    return 'alive'
  } catch (err) {
    return err.code === 'ESRCH' ? 'dead' : 'unknown'
  }
}

const errText = (err) => (err && err.code ? `${err.code}: ${String(err.message).replace(/^\w+: /, '')}` : String(err))

/**
 * Judge one `*.json` file: { kind: 'valid', value } or { kind, reason, rule?, field? } where kind
 * is unreadable | bom | not-json | schema | name-mismatch. Returns null when the file vanished
 * between listing and reading (a concurrent remove is not a problem).
 */
function judgeEntryFile(dir, name) {
  const file = path.join(dir, name)
  let bytes
  try {
    bytes = fs.readFileSync(file)
  } catch (err) {
    if (err.code === 'ENOENT') {
      try {
        fs.lstatSync(file)
      } catch {
        return null
      }
      return { kind: 'unreadable', reason: `cannot be read (${errText(err)}; a symbolic link to nothing)` }
    }
    if (err.code === 'EISDIR') return { kind: 'unreadable', reason: 'is a directory, not an entry file' }
    return { kind: 'unreadable', reason: `cannot be read (${errText(err)})` }
  }
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
      entryId: value.entryId,
      reason: `holds entry ${JSON.stringify(value.entryId)} but is not named ${JSON.stringify(`${value.entryId}.json`)}: listEntries shows it, readEntry/writeEntry for that id use the other file`,
    }
  }
  return { kind: 'valid', value }
}

/**
 * Everything in a process-matrix directory that is not a valid entry.
 * Returns { state, reason?, problems, inFlight, validFiles } where state is
 * ok | missing | not-a-directory | unreadable; each problem is
 * { file, kind, reason, rule?, field?, ageMs? }.
 */
function diagnoseMatrixDir(dir, now = Date.now()) {
  const out = { state: 'ok', problems: [], inFlight: [], validFiles: 0 }
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
        continue
      }
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

// ---- recovery candidates (SPEC §2.A) ----------------------------------------------------------

/** Why the library found nothing in one candidate file (plain words). */
function explainCandidate(file, maxFileBytes) {
  let st
  try {
    st = fs.statSync(file)
  } catch (err) {
    return { reason: 'unreadable', detail: `cannot be read (${errText(err)})` }
  }
  if (!st.isFile()) return { reason: 'unreadable', detail: 'is not a regular file' }
  if (st.size === 0) return { reason: 'empty', detail: 'is empty', size: 0 }
  if (st.size > maxFileBytes) {
    return { reason: 'size-cap', detail: `is ${st.size} bytes, over the ${maxFileBytes}-byte cap (options.maxFileBytes)`, size: st.size }
  }
  let text
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch (err) {
    return { reason: 'unreadable', detail: `cannot be read (${errText(err)})`, size: st.size }
  }
  // A line without its newline may still be being written: the library ignores it.
  const entries = parseEntries(completeLines(text))
  if (migrationThrows(entries)) {
    return { reason: 'unmigratable', detail: 'is an old-format session the SDK cannot migrate (it holds a non-object line), so it is skipped', size: st.size }
  }
  if (lastAnswer(entries) === null) {
    return { reason: 'no-assistant-turn', detail: 'has no complete assistant turn (an assistant message with text and a final stop reason)', size: st.size }
  }
  return { reason: 'changed', detail: 'has a complete assistant turn now: it changed while recovery ran, or the deadline passed', size: st.size }
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

module.exports = { diagnoseMatrixDir, judgeEntryFile, explainCandidates, formatAge, LOCK_STALE_MS }
