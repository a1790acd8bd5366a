verify remat_plan_differs.hlo --shrink
