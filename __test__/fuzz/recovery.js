'use strict'
// Fuzz property of session recovery: each backend against the SDK-based reference
// (../session-oracle.js) on arbitrary session folders (./sessions.js).
const fc = require('fast-check')
const assert = require('node:assert/strict')
const { recoverOracle } = require('../session-oracle.js')
const { sessionFolder, materialize, describe } = require('./sessions.js')

/** recoverLastAssistantFromSession answers what the reference answers, property order included. */
function recoveryProperty(backends, tmp, sdk) {
  return fc.asyncProperty(sessionFolder, async (folder) => {
    const dir = tmp()
    materialize(dir, folder)
    const want = recoverOracle(sdk, dir, folder.sessionId, folder.options ?? undefined)
    for (const [name, s] of backends) {
      const args = folder.options ? [dir, folder.sessionId, folder.options] : [dir, folder.sessionId]
      const got = await s.recoverLastAssistantFromSession(...args)
      assert.deepStrictEqual(got, want, `${name} differs from the SDK reference`)
      if (want) assert.deepStrictEqual(Object.keys(got), Object.keys(want), `${name}: property order`)
    }
  })
}

module.exports = { recoveryProperty, describe }
