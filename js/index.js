'use strict'
// The pure-JavaScript backend: same surface as the native addon.
const liveness = require('./liveness.js')
const store = require('./process-matrix-store.js')
const events = require('./events.js')
const { createExitWaits, createEntryWatches, probeEnded } = require('../lib/contract/events.js')

module.exports = {
  ...liveness,
  ...require('./session-recovery.js'),
  ...store,
  ...require('./atomic-file.js'),
  // No kernel route from JavaScript: every exit wait is probed.
  ...createExitWaits({ exitWatch: null, ended: probeEnded(liveness) }),
  ...createEntryWatches({
    dirWatch: events.createDirWatch(),
    scan: events.scan,
    isRemote: events.isRemote,
    readEntry: store.readEntry,
  }),
}
