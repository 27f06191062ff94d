import { EmptyState } from '../components/StateViews';
import { PageHeader } from '../components/PageHeader';

export default function UsersPage() {
  return (
    <>
      <PageHeader title="Users and roles" />
      <EmptyState title="Coming soon" />
    </>
  );
}
