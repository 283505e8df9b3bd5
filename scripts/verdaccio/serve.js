'use strict'
// Started by scripts/test-registry.js as a child process: runs verdaccio (installed in the
// folder argv[2]) with the configuration file argv[3], listening on 127.0.0.1 on a port the OS
// picks (port 0, so no other process can take it between choosing and binding), and sends that
// port to the parent over the IPC channel. Logs go to this process's stdout/stderr, which the
// parent sends to a file.
const path = require('node:path')

const [installDir, configFile] = process.argv.slice(2)
const { runServer } = require(require.resolve('verdaccio', { paths: [path.resolve(installDir)] }))

runServer(path.resolve(configFile)).then(
  (server) => {
    server.on('error', (err) => {
      console.error(`verdaccio: ${err.stack || err}`)
      process.exit(1)
    })
    server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }))
  },
  (err) => {
    console.error(`verdaccio did not start: ${err.stack || err}`)
    process.exit(1)
  },
)
// The parent going away (crash, kill) closes the channel: stop too, never linger.
process.on('disconnect', () => process.exit(0))
