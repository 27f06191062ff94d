import { EmptyState } from '../components/StateViews';
import { PageHeader } from '../components/PageHeader';

export default function HealthPage() {
  return (
    <>
      <PageHeader title="System health" />
      <EmptyState title="Coming soon" />
    </>
  );
}
