'use strict'
// The pure-JavaScript backend: same surface as the native addon.
module.exports = {
  ...require('./liveness.js'),
  ...require('./session-recovery.js'),
  ...require('./process-matrix-store.js'),
  ...require('./atomic-file.js'),
}
