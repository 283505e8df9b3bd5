#!/usr/bin/env node
'use strict'
// `npm run sim [-- args]`: build the lock simulator (feature `sim`, profile `sim`: optimized,
// no whole-program link) and run it (src/bin/pi-native-sim.rs; docs/LOCKING.md). Without
// arguments it explores fresh seeds for PI_NATIVE_SIM_SECONDS seconds (default 60) and prints the
// first seed, and the command that replays any that fails. Arguments go to the simulator:
// `--seed S` replays one run (`--trace` prints its calls), `--from S --seeds N`, `--seconds B`,
// `--mutate repeat-rmdir|mtime-identity|no-private-name|forget-orphans`.
const { spawnSync } = require('node:child_process')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
const built = spawnSync('cargo', ['build', '--quiet', '--profile', 'sim', '--features', 'sim', '--bin', 'pi-native-sim'], {
  cwd: root,
  stdio: 'inherit',
})
if (built.status !== 0) process.exit(built.status ?? 1)
let args = process.argv.slice(2)
if (args.length === 0) args = ['--seconds', String(Number(process.env.PI_NATIVE_SIM_SECONDS) || 60)]
const exe = path.join(root, 'target', 'sim', process.platform === 'win32' ? 'pi-native-sim.exe' : 'pi-native-sim')
const r = spawnSync(exe, args, { cwd: root, stdio: 'inherit' })
process.exit(r.status ?? 1)
