import { EmptyState } from '../components/StateViews';
import { PageHeader } from '../components/PageHeader';

export default function OverviewPage() {
  return (
    <>
      <PageHeader title="Overview" />
      <EmptyState title="Coming soon" />
    </>
  );
}
