export {
  isReloadSessionProcessAlive,
  defaultIsPidAlive,
  checkProcessLiveness,
  getProcessStartTime,
  probePid,
  probePids,
  getProcessIdentity,
  isSameProcess,
} from '../index'
export type { IntegrationLockOwner, ProcessLiveness, ProcessIdentity } from '../index'
