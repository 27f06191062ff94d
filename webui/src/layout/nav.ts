import type { Role } from '../api/endpoints';

export interface NavItem {
  to: string;
  label: string;
  /** Only shown to users whose role is at least this one (the API's rule for the page's data). */
  minRole?: Role;
}

export const NAV_ITEMS: NavItem[] = [
  { to: '/', label: 'Overview' },
  { to: '/flows', label: 'Flows' },
  { to: '/sites', label: 'Sites' },
  { to: '/policy', label: 'Policy' },
  { to: '/bypass', label: 'IPsec bypass' },
  { to: '/bod', label: 'BoD tuning' },
  { to: '/cache', label: 'Cache' },
  { to: '/dns', label: 'DNS' },
  { to: '/history', label: 'Config history' },
  { to: '/users', label: 'Users and roles', minRole: 'admin' },
  { to: '/audit', label: 'Audit log', minRole: 'admin' },
  { to: '/backup', label: 'Backup and restore', minRole: 'admin' },
  { to: '/system', label: 'System settings' },
  { to: '/tokens', label: 'API tokens', minRole: 'operator' },
  { to: '/fleet', label: 'Fleet' },
  { to: '/health', label: 'System health' },
];
