'use strict'
// The README as a new user meets it, and the docs' fragments of host code:
// - runQuickStart: for each quick-start variant (```js CommonJS, ```js esm, ```ts nodenext), a
//   fresh project made by `npm init -y`, the README's install line run as printed (the tarball
//   copied in under the name it prints), the variant's own setup as the README prints it, the
//   block saved verbatim and run: on both backends, it must print the backend, `alive` and the
//   ids of the entries of the agentDir it finds through HOME. Nothing is injected: a block that
//   uses a name it does not define fails to compile or to run.
// - compileAndRunFragments: docs/GUIDE.md's ```js fragment / ```ts fragment blocks are parts of a
//   host's code; they are compiled with `tsc --strict` (module/moduleResolution nodenext) and run,
//   the host's free names (a pid, an agentDir, a signal) declared and set from CONTEXT.
// - checkCli: every command and option of the README's CLI synopsis run with its documented exit
//   code, from the packed tarball installed in a fresh project (package.test.js makes it).
// Blocks are found by their info string (scripts/readme.js); an unknown one fails.
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { fences, commands } = require('../scripts/readme.js')
const { typesNode, tscCommand } = require('../scripts/typescript-versions.js')
const { npmCommand } = require('../scripts/tools.js')
const { zombie, reapedPid, liveChild } = require('./helpers.js')

const root = path.resolve(__dirname, '..')
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')

/** How long an example's `signal` lets it run (AbortSignal.timeout). */
const SIGNAL_MS = 1500

/**
 * The free variables examples may use: TypeScript type and the value a run gets (`c` holds the
 * run's temp folders and children). `signal` is made in the example's own process.
 */
const CONTEXT = {
  agentDir: ['string', (c) => c.agentDir],
  pid: ['number', (c) => c.live.pid],
  pid1: ['number', () => process.pid],
  pid2: ['number', (c) => c.live.pid],
  owner: ["import('pi-native/liveness').IntegrationLockOwner", (c) => ({ pid: c.live.pid, hostname: os.hostname(), token: 'token-1', acquiredAt: new Date().toISOString() })],
  parentPid: ['number', (c) => c.parent.pid],
  agentId: ['string', () => 'agent-1'],
  sessionId: ['string', () => 'session-1'],
  artifactsRoot: ['string', (c) => c.artifactsRoot],
  sessionDir: ['string', (c) => c.sessionDir],
  spawnArgs: ['string[]', () => ['--mode', 'json', '-p', 'task.md']],
  builtArgs: ['string[]', () => ['--mode', 'json', '-p', 'task.md']],
  input: ['{ sessionRecovery?: boolean }', () => ({ sessionRecovery: true })],
  result: ['{ exitCode: number | null }', () => ({ exitCode: null })],
  killed: ['boolean', () => false],
  signal: ['AbortSignal', null],
}

/** A pi session file with one complete assistant answer (what the session-recovery example recovers). */
function writeSession(dir, sessionId, text) {
  fs.mkdirSync(dir, { recursive: true })
  const line = (o) => JSON.stringify(o) + '\n'
  fs.writeFileSync(
    path.join(dir, `2026-07-19T12-00-00-000Z_${sessionId}.jsonl`),
    line({ type: 'session', version: 3, id: sessionId, timestamp: '2026-07-19T12:00:00.000Z', cwd: '/' }) +
      line({ type: 'message', id: 'a1', parentId: null, timestamp: '2026-07-19T12:00:01.000Z', message: { role: 'assistant', content: [{ type: 'text', text }], stopReason: 'stop' } }),
  )
}

/** A page's blocks, each with a known kind (an unknown info string is a failure here). */
function readmeBlocks(text, page = 'README.md') {
  const blocks = fences(text)
  const unknown = blocks.filter((b) => !b.kind).map((b) => `${page}:${b.line - 1}: \`\`\`${b.info} (under "${b.heading}")`)
  assert.deepEqual(unknown, [], `every fenced block of ${page} is marked as what checks it (scripts/readme.js)`)
  return blocks
}

/** docs/GUIDE.md line of `file(row,col)` in tsc's output, for a fragment written to ex-<line>.<ext>. */
const toReadmeLines = (out) => out.replace(/ex-(\d+)\.[cm]?[jt]s\((\d+),(\d+)\)/g, (_, line, row, col) => `docs/GUIDE.md:${Number(line) + Number(row) - 1}:${col}`)

/**
 * Compile every fragment of docs/GUIDE.md with tsc --strict (nodenext) in a fresh project under
 * `consumer`, run each, and check what a run must leave behind. Returns the runs:
 * [{ block, status, stdout, stderr }].
 */
async function compileAndRunFragments(consumer, guide) {
  const examples = readmeBlocks(guide, 'docs/GUIDE.md').filter((b) => b.kind === 'fragment')
  assert.ok(examples.length >= 4, `docs/GUIDE.md's fragments (${examples.length})`)
  const dir = path.join(consumer, 'guide-fragments')
  fs.mkdirSync(path.join(dir, 'node_modules', '@types'), { recursive: true })
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'readme-examples', private: true, type: 'module' }))
  fs.symlinkSync(typesNode(), path.join(dir, 'node_modules', '@types', 'node'), 'junction')
  // A script (no import/export): its `declare var`s are globals every example sees.
  fs.writeFileSync(path.join(dir, 'context.d.ts'), Object.entries(CONTEXT).map(([name, [type]]) => `declare var ${name}: ${type}\n`).join(''))
  fs.writeFileSync(
    path.join(dir, 'context.cjs'),
    `const c = JSON.parse(process.env.PI_NATIVE_README_CONTEXT)\nObject.assign(globalThis, c.values)\nglobalThis.signal = AbortSignal.timeout(c.signalMs)\n`,
  )
  const files = examples.map((b) => {
    // A JavaScript block is checked as JavaScript (checkJs): ESM unless it uses require().
    const ext = b.info.startsWith('ts') ? 'ts' : /\brequire\(/.test(b.body) ? 'cjs' : 'mjs'
    const file = `ex-${b.line}.${ext}`
    fs.writeFileSync(path.join(dir, file), b.body)
    return file
  })
  const compilerOptions = {
    strict: true,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2022',
    lib: ['es2023'], // Node, not a browser: no DOM globals
    types: ['node'],
    allowJs: true,
    checkJs: true,
    skipLibCheck: false,
    outDir: 'out',
    rootDir: '.',
  }
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['context.d.ts', ...files] }))
  const build = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: dir, encoding: 'utf8' })
  assert.equal(build.status, 0, `docs/GUIDE.md's fragments must compile (tsc --strict, nodenext):\n${toReadmeLines(build.stdout + build.stderr)}`)

  const runs = []
  for (const [i, block] of examples.entries()) {
    const out = path.join('out', files[i].replace(/\.ts$/, '.js'))
    runs.push(await runExample(dir, block, out))
  }
  return runs
}

/** Run one compiled example with a fresh context; check its run and what it left on disk. */
async function runExample(dir, block, file) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-readme-'))
  const live = liveChild(60)
  const parent = liveChild(0.3) // the supervision example waits for it to end
  try {
    const c = { live, parent, agentDir: path.join(tmp, 'agent'), artifactsRoot: path.join(tmp, 'artifacts') }
    c.sessionDir = path.join(c.artifactsRoot, 'sessions', 'agent-1')
    writeSession(c.sessionDir, 'session-1', 'done')
    const values = Object.fromEntries(Object.entries(CONTEXT).filter(([, [, make]]) => make).map(([name, [, make]]) => [name, make(c)]))
    const env = { ...process.env, PI_NATIVE_README_CONTEXT: JSON.stringify({ values, signalMs: SIGNAL_MS }) }
    const child = spawn(process.execPath, ['--require', './context.cjs', file], { cwd: dir, env })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    const status = await new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)))
    clearTimeout(timer)
    const where = `docs/GUIDE.md:${block.line - 1} (the fragment under "${block.heading}")`
    assert.equal(status, 0, `${where} must run to its end:\n${stderr}`)
    assert.equal(stderr, '', `${where} writes nothing to stderr`)
    // An exit hook that closes the example's entry must find the entry that is on disk.
    if (/process\.(?:once|on)\('exit'/.test(block.body) && block.body.includes('writeEntryIfUnchangedSync')) {
      const matrix = path.join(c.agentDir, 'state', 'process-matrix')
      const entries = fs.readdirSync(matrix).filter((n) => n.endsWith('.json')).map((n) => JSON.parse(fs.readFileSync(path.join(matrix, n), 'utf8')))
      assert.ok(entries.length > 0, `${where} writes an entry`)
      assert.deepEqual(entries.map((e) => e.status), entries.map(() => 'closed'), `${where}: its exit hook closes the entry on disk`)
    }
    return { block, status, stdout, stderr }
  } finally {
    live.kill('SIGKILL')
    parent.kill('SIGKILL')
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

/** The README's section under `## <title>` (to the next `## `). */
function section(readme, title) {
  const start = readme.indexOf(`\n## ${title}\n`)
  assert.ok(start >= 0, `the README has a "${title}" section`)
  const end = readme.indexOf('\n## ', start + 1)
  return readme.slice(start + 1, end === -1 ? undefined : end + 1)
}

/** Runs `[cmd, args]` in `cwd`; asserts it succeeds; its stdout. */
function run([cmd, args], cwd, env = process.env) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', env })
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} in ${cwd}\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

/**
 * The README's install line and quick start as a new user runs them (see the top of this file).
 * `tarballPath` is the packed tarball; each variant gets a project of its own under `workDir`.
 */
async function runQuickStart(workDir, tarballPath, readme) {
  const blocks = readmeBlocks(readme)
  const quick = section(readme, 'Quick start')
  assert.ok(quick.trimEnd().split('\n').length <= 40, `the quick start takes ${quick.trimEnd().split('\n').length} lines (at most 40)`)
  const variants = blocks.filter((b) => b.kind === 'quickstart')
  assert.deepEqual(variants.map((b) => b.info), ['js', 'js esm', 'ts'], 'the quick start: CommonJS, ES module, TypeScript')
  for (const b of variants) assert.equal(b.heading, 'Quick start', `\`\`\`${b.info} is in the quick start`)
  const installs = blocks.filter((b) => b.kind === 'install').flatMap((b) => commands(b.body))
  const tarName = path.basename(tarballPath)
  assert.deepEqual(installs, [`npm install ./${tarName}`], 'one install line, naming the tarball npm pack makes')
  // The steps the quick start prints around its blocks, each run below as printed.
  const steps = { init: 'npm init -y', run: 'node index.js', esm: 'npm pkg set type=module', tsDeps: 'npm install --save-dev typescript @types/node', ts: 'npx tsc --module nodenext --types node index.ts && node index.js' }
  for (const text of Object.values(steps)) assert.ok(quick.includes(`\`${text}\``), `the quick start says \`${text}\``)

  // An agentDir with one entry where the example looks for it: ~/.pi/agent of a HOME of its own.
  const home = fs.mkdtempSync(path.join(workDir, 'home-'))
  const agentDir = path.join(home, '.pi', 'agent')
  const store = require('../lib/process-matrix-store.js')
  const now = new Date().toISOString()
  await store.writeEntry(agentDir, {
    entryId: 'master-s1', role: 'master', status: 'running', pid: process.pid, hostname: os.hostname(), startedAt: now, heartbeatAt: now,
    agent: { agentId: 'a1', resumeContext: { provider: 'pi', sessionId: 's1', cwd: '/', resourceProfileNames: [], contextPointers: [] } },
  })
  const env = { ...process.env, HOME: home, USERPROFILE: home, npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' }
  delete env.PI_CODING_AGENT_DIR

  for (const block of variants) {
    const project = fs.mkdtempSync(path.join(workDir, 'quickstart-'))
    run(npmCommand(steps.init.split(' ').slice(1)), project, env)
    fs.copyFileSync(tarballPath, path.join(project, tarName))
    run(npmCommand(installs[0].split(' ').slice(1)), project, env)
    if (block.info === 'js esm') run(npmCommand(steps.esm.split(' ').slice(1)), project, env)
    // The TypeScript variant compiles with the repository's TypeScript and, on the first Node line,
    // with TypeScript 7 too (a new user's `npm install typescript` may get either).
    const compilers = block.info !== 'ts' ? [null] : [require('typescript/package.json').version, ...(process.env.PI_NATIVE_TEST_EXTRA_NODE ? [] : ['7.0.2'])]
    for (const version of compilers) {
      if (version === null) fs.writeFileSync(path.join(project, 'index.js'), block.body)
      else {
        // `npm install --save-dev typescript @types/node`, from pinned copies instead of the
        // registry: what the command leaves in node_modules (the package, its bin, the types).
        const nm = path.join(project, 'node_modules')
        fs.mkdirSync(path.join(nm, '@types'), { recursive: true })
        fs.mkdirSync(path.join(nm, '.bin'), { recursive: true })
        for (const link of [path.join(nm, 'typescript'), path.join(nm, '@types', 'node'), path.join(nm, '.bin', 'tsc')]) fs.rmSync(link, { force: true, recursive: true })
        const [, [tscJs]] = tscCommand(version, [])
        const pkg = path.dirname(path.dirname(tscJs))
        fs.symlinkSync(pkg, path.join(nm, 'typescript'), 'junction')
        fs.symlinkSync(typesNode(), path.join(nm, '@types', 'node'), 'junction')
        fs.symlinkSync(path.relative(path.join(nm, '.bin'), tscJs), path.join(nm, '.bin', 'tsc'))
        fs.writeFileSync(path.join(project, 'index.ts'), block.body)
        // `npx tsc …` is `npm exec -- tsc …`; then `node index.js`.
        const [compile, start] = steps.ts.split(' && ')
        fs.rmSync(path.join(project, 'index.js'), { force: true })
        const out = spawnSync(...npmCommand(['exec', '--', ...compile.split(' ').slice(1)]), { cwd: project, encoding: 'utf8', env })
        assert.equal(out.status, 0, `README.md:${block.line - 1}: \`${compile}\` (TypeScript ${version}) must compile the TypeScript quick start as printed:\n${out.stdout}${out.stderr}`)
        assert.equal(start, steps.run)
      }
      for (const backend of ['native', 'js']) {
        const r = spawnSync(process.execPath, ['index.js'], { cwd: project, encoding: 'utf8', env: { ...env, PI_NATIVE_BACKEND: backend }, timeout: 60_000 })
        const where = `README.md:${block.line - 1} (the \`\`\`${block.info} quick start${version ? `, TypeScript ${version}` : ''}, ${backend} backend)`
        assert.equal(r.status, 0, `${where} must run as printed:\n${r.stderr}`)
        assert.equal(r.stderr, '', `${where} writes nothing to stderr`)
        assert.equal(r.stdout, `${backend} alive [ 'master-s1' ]\n`, where)
      }
    }
  }
}

/** The README's exit-code table: { matrix: [[code, text]], recover: …, pid: … }. */
function exitTable(readme) {
  const rows = readme.split('\n').filter((l) => /^\| [0-9] \|/.test(l))
  const header = readme.split('\n').find((l) => /^\| exit \| `matrix` \| `recover` \| `pid`/.test(l))
  assert.ok(header && rows.length, 'the README has the CLI exit-code table')
  const columns = header.split('|').slice(2, -1).map((c) => /`(\w+)`/.exec(c)[1])
  const table = Object.fromEntries(columns.map((c) => [c, []]))
  for (const row of rows) {
    const cells = row.split('|').slice(1, -1).map((c) => c.trim())
    columns.forEach((c, i) => table[c].push([Number(cells[0]), cells[i + 1]]))
  }
  return table
}

/** The exit code the README documents for `command` in the situation its table cell starts with `says`. */
function documentedExit(table, command, says) {
  const hits = table[command].filter(([, text]) => text.startsWith(says))
  assert.equal(hits.length, 1, `one exit code of \`${command}\` is documented as "${says}…" (${JSON.stringify(table[command])})`)
  return hits[0][0]
}

/**
 * Every command and option of the README's CLI synopsis, run through the installed package's
 * bin (the first one through `npx`, as printed), against the exit-code table.
 */
async function checkCli(consumer, readme, npmCommand) {
  const blocks = readmeBlocks(readme).filter((b) => b.kind === 'cli')
  assert.equal(blocks.length, 1, 'one ```sh cli block')
  const synopsis = commands(blocks[0].body).map((line, i) => {
    assert.match(line, /^npx pi-native /, `README.md:${blocks[0].line + i}: a CLI line starts with "npx pi-native"`)
    const raw = blocks[0].body.split('\n').filter((l) => l.trim())[i]
    const words = line.split(/\s+/).slice(2)
    // The command is the first word; the options are every flag on the line, its comment's
    // alternatives ("or: <command> --help | -h") included.
    return { command: words[0], flags: [...new Set(raw.match(/(?<![\w-])--?[a-z][\w-]*/g) ?? [])] }
  })
  const table = exitTable(readme)
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-readme-cli-'))
  const holders = []
  try {
    const bin = path.join(consumer, 'node_modules', 'pi-native', require(path.join(consumer, 'node_modules', 'pi-native', 'package.json')).bin['pi-native'])
    const store = require(path.join(consumer, 'node_modules', 'pi-native', 'lib', 'process-matrix-store.js'))
    const now = new Date().toISOString()
    const entry = (sessionId) => ({
      entryId: `master-${sessionId}`,
      role: 'master',
      pid: process.pid,
      hostname: os.hostname(),
      startedAt: now,
      heartbeatAt: now,
      status: 'running',
      agent: { agentId: 'agent-1', resumeContext: { provider: 'pi', sessionId, cwd: '/', resourceProfileNames: [], contextPointers: [] } },
    })
    const healthy = path.join(tmp, 'healthy')
    await store.writeEntry(healthy, entry('s1'))
    // An entry writeEntry accepts and readEntry reads as undefined (V8): matrix names the rule.
    const broken = path.join(tmp, 'broken')
    await store.writeEntry(broken, { ...entry('s2'), entryId: 'master-other' })
    const sessions = path.join(tmp, 'sessions')
    writeSession(sessions, 'session-1', 'recovered text')
    const nothing = path.join(tmp, 'nothing')
    fs.mkdirSync(nothing)
    fs.writeFileSync(path.join(nothing, 'x_session-1.jsonl'), JSON.stringify({ type: 'session', version: 3, id: 'x', timestamp: now, cwd: '/' }) + '\n')
    const empty = path.join(tmp, 'empty')
    fs.mkdirSync(empty)
    const aFile = path.join(tmp, 'file')
    fs.writeFileSync(aFile, '')
    const dead = await reapedPid()
    const z = process.platform === 'linux' ? await zombie() : null
    if (z) holders.push(z.holder)

    const { version } = require(path.join(consumer, 'node_modules', 'pi-native', 'package.json'))
    const json = (out) => JSON.parse(out)
    // [args, expected exit (number, or [command, what the exit table says]), check of stdout]
    const scenarios = [
      [['matrix', healthy], ['matrix', 'healthy'], (out) => assert.match(out, /master-s1/)],
      [['matrix', healthy, '--json'], ['matrix', 'healthy'], (out) => assert.deepEqual(json(out).entries.map((e) => e.entryId), ['master-s1'])],
      [['matrix', broken, '--json'], ['matrix', 'problems found'], (out) => assert.deepEqual(json(out).problems.map((p) => [p.kind, p.rule, p.field]), [['schema', 'V8', 'entryId']])],
      [['matrix', path.join(tmp, 'missing')], ['matrix', 'problems found'], null],
      [['matrix', '--bogus'], ['matrix', 'usage error'], null],
      [['recover', sessions], ['recover', 'recovered'], (out) => assert.match(out, /recovered text/)],
      [['recover', sessions, '--session-id', 'session-1', '--json'], ['recover', 'recovered'], (out) => assert.equal(json(out).result.text, 'recovered text')],
      [['recover', nothing], ['recover', 'candidates looked at'], null],
      [['recover', empty], ['recover', 'no `*.jsonl`'], null],
      [['recover', path.join(tmp, 'missing')], ['recover', 'the directory does not exist'], null],
      [['recover', aFile], ['recover', 'the path is not a directory'], null],
      [['pid', String(process.pid)], ['pid', 'every pid alive'], null],
      [['pid', String(process.pid), String(dead), '--json'], ['pid', 'dead'], (out) => assert.deepEqual(json(out).map((p) => p.state), ['alive', 'dead'])],
      ...(z ? [[['pid', String(z.pid)], ['pid', 'zombie'], null]] : []),
      [['pid', '0'], ['pid', 'invalid'], null],
      [['pid'], ['pid', 'usage error'], null],
      [['help'], 0, (out) => assert.match(out, /matrix/)],
      [['help', 'recover'], 0, (out) => assert.match(out, /--session-id/)],
      [['help', 'nope'], 2, null],
      [['matrix', '--help'], 0, (out) => assert.match(out, /--watch/)],
      [['pid', '-h'], 0, (out) => assert.match(out, /pid/)],
      [['--version'], 0, (out) => assert.equal(out.trim(), version)],
      [['-v'], 0, (out) => assert.equal(out.trim(), version)],
    ]
    assert.match(readme, /`help`, `--help` and `--version` exit 0 \(`help <unknown>` exits 2\)/, 'the README says what help and --version exit with')
    for (const [i, [args, expected, check]] of scenarios.entries()) {
      const [cmd, cmdArgs] = i === 0 ? npmCommand(['exec', '--', 'pi-native', ...args]) : [process.execPath, [bin, ...args]]
      const r = spawnSync(cmd, cmdArgs, { cwd: consumer, encoding: 'utf8' })
      const exit = typeof expected === 'number' ? expected : documentedExit(table, ...expected)
      assert.equal(r.status, exit, `npx pi-native ${args.join(' ')}: exit ${exit} as documented\n${r.stdout}\n${r.stderr}`)
      if (check) check(r.stdout)
    }
    // `matrix --watch`: one JSON document per report, until SIGTERM, which ends it.
    const watch = spawn(process.execPath, [bin, 'matrix', healthy, '--watch', '--json'], { cwd: consumer })
    let first = ''
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('matrix --watch printed no report')), 20_000)
      watch.stdout.on('data', (d) => {
        first += d
        if (first.includes('\n')) (clearTimeout(timer), resolve())
      })
    })
    assert.deepEqual(JSON.parse(first.slice(0, first.indexOf('\n'))).entries.map((e) => e.entryId), ['master-s1'])
    const watchExit = new Promise((resolve) => watch.once('exit', (code, signal) => resolve(code ?? signal)))
    watch.kill('SIGTERM')
    // Windows has no signal to send a child: kill() terminates it there.
    if (process.platform !== 'win32') assert.equal(await watchExit, 'SIGTERM', 'matrix --watch ends by SIGTERM')
    else await watchExit
    scenarios.push([['matrix', '--watch']])

    // Every command and option of the synopsis was run.
    for (const { command, flags } of synopsis) {
      // A line that is a flag (`--version`) is run as one of its flags; `help` also as `<command> --help`.
      const runs = ([args]) =>
        command.startsWith('-') ? flags.includes(args[0]) : args[0] === command || (command === 'help' && args.some((a) => flags.includes(a)))
      const used = scenarios.filter(runs)
      assert.ok(used.length, `the synopsis command "${command}" is run`)
      for (const f of flags) assert.ok(used.some(([args]) => args.includes(f)), `the option ${f} of "${command}" is run`)
    }
  } finally {
    for (const h of holders) h.kill('SIGKILL')
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

module.exports = { readmeBlocks, runQuickStart, compileAndRunFragments, checkCli, CONTEXT }
