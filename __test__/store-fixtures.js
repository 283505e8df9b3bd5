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

module.exports = { makeEntry, tempAgentDir, matrixDir, leftovers }
