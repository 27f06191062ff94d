// Roles as the API enforces them (admin > operator > viewer): the dashboard offers only what the signed-in
// role may do, and shows every page it may read. The API still checks every request.
import { Alert } from '@mantine/core';
import type { ReactNode } from 'react';
import type { Role } from '../api/endpoints';
import { PageHeader } from '../components/PageHeader';
import { useAuth } from './useAuth';

const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

export function roleAtLeast(role: Role | undefined | null, needed: Role): boolean {
  return role != null && RANK[role] >= RANK[needed];
}

/** `can('operator')`: whether the signed-in user's role may do what that role may. */
export function useCan(): (needed: Role) => boolean {
  const { user } = useAuth();
  return (needed) => roleAtLeast(user?.role, needed);
}

/** A page only some roles may open: anyone else gets a plain "not for your role" page, not a page of errors. */
export function RequireRole({ role, title, children }: { role: Role; title: string; children: ReactNode }) {
  const { user } = useAuth();
  if (roleAtLeast(user?.role, role)) return <>{children}</>;
  return (
    <>
      <PageHeader title={title} />
      <Alert color="gray" role="alert" title={`Needs role ${role}`}>
        Your role ({user?.role ?? 'none'}) cannot open this page. An {role === 'admin' ? 'admin' : 'operator or admin'} can.
      </Alert>
    </>
  );
}
