'use strict'
// Process-matrix entries for tests.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

function makeEntry(role = 'master', sessionId = 'session-1', overrides = {}) {
  return {
    entryId: `${role}-${sessionId}`,
    role,
    agent: {
      agentId: `agent-${sessionId}`,
      resumeContext: {
        provider: 'pi',
        sessionId,
        cwd: '/work/repo',
        resourceProfileNames: ['default'],
        contextPointers: [{ id: 'repo', kind: 'repository', uri: 'file:///work/repo', readOnly: true }],
      },
    },
    pid: 1000,
    hostname: 'host-a',
    startedAt: '2026-07-19T00:00:00.000Z',
    heartbeatAt: '2026-07-19T00:00:30.000Z',
    status: 'running',
    ...overrides,
  }
}

function tempAgentDir(prefix = 'pi-native-store-') {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix))
}

const matrixDir = (agentDir) => path.join(agentDir, 'state', 'process-matrix')

/** Every file and directory left in the matrix directory (temp files, lock dirs …). */
const leftovers = (agentDir) => {
  try {
    return fs.readdirSync(matrixDir(agentDir))
  } catch {
    return []
  }
}

/**
 * A matrix directory of `n` entry files (~1.5 KB each) with rejects mixed in at fixed strides:
 * invalid status, unparsable JSON, and timestamps only V8 can judge (one finite, one not).
 * Returns what `listEntries` must resolve: accepted entries, in name order, as parsed.
 */
function writeLargeMatrix(agentDir, n) {
  const dir = matrixDir(agentDir)
  fs.mkdirSync(dir, { recursive: true })
  const expected = []
  const note = 'a long note that makes each file realistic in size. '.repeat(20)
  for (let i = 0; i < n; i++) {
    const sessionId = `s${String(i).padStart(6, '0')}`
    let entry = makeEntry('worker', sessionId, { taskRef: String(i), note })
    let keep = true
    let text
    if (i % 97 === 5) {
      entry = { ...entry, status: 'bogus' }
      keep = false
    } else if (i % 89 === 7) {
      entry = { ...entry, startedAt: 'Sat, 18 Jul 2026 00:00:00 GMT' } // finite for V8 only
    } else if (i % 83 === 11) {
      entry = { ...entry, heartbeatAt: 'not a date' }
      keep = false
    } else if (i % 101 === 13) {
      text = '{"entryId": '
      keep = false
    }
    text ??= JSON.stringify(entry, null, '\t') + '\n'
    fs.writeFileSync(path.join(dir, `${entry.entryId}.json`), text)
    if (keep) expected.push(entry)
  }
  return expected
}

module.exports = { makeEntry, tempAgentDir, matrixDir, leftovers, writeLargeMatrix }
