import { EmptyState } from '../components/StateViews';
import { PageHeader } from '../components/PageHeader';

export default function AuditPage() {
  return (
    <>
      <PageHeader title="Audit log" />
      <EmptyState title="Coming soon" />
    </>
  );
}
