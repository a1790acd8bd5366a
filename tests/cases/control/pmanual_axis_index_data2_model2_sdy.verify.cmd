verify pmanual_axis_index_data2_model2_sdy.hlo --mesh data=2,model=2
