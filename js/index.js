'use strict'
// The pure-JavaScript backend: same surface as the native addon.
const liveness = require('./liveness.js')
const store = require('./process-matrix-store.js')
const events = require('./events.js')
const { createExitWaits, createEntryWatches, probeEnded } = require('../lib/contract/events.js')
const { hardenStore } = require('../lib/contract/hardened.js')

const watches = createEntryWatches({
  dirWatch: events.createDirWatch(),
  scan: events.scan,
  isRemote: events.isRemote,
  // A watch reads as readEntry does, hardened mode included.
  readEntry: (agentDir, entryId) => hardenedStore.readEntry(agentDir, entryId),
})
// PI_NATIVE_HARDENED (lib/contract/hardened.js) over the store and its watch.
const hardenedStore = hardenStore({ ...store, ...watches })

module.exports = {
  ...liveness,
  ...require('./session-recovery.js'),
  ...store,
  ...require('./atomic-file.js'),
  // No kernel route from JavaScript: every exit wait is probed.
  ...createExitWaits({ exitWatch: null, ended: probeEnded(liveness) }),
  ...watches,
  ...hardenedStore,
}
