export interface NavItem {
  to: string;
  label: string;
  /** Only shown to users whose role may use the page. */
  adminOnly?: boolean;
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
  { to: '/users', label: 'Users and roles', adminOnly: true },
  { to: '/audit', label: 'Audit log' },
  { to: '/backup', label: 'Backup and restore', adminOnly: true },
  { to: '/system', label: 'System settings' },
  { to: '/fleet', label: 'Fleet' },
  { to: '/terminals', label: 'Terminals' },
  { to: '/health', label: 'System health' },
];
